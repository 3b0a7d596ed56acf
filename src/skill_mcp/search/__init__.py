"""Search: rank skills for the words a person would type. Pure ranking; never imports ``mcp``.

    text     - normalisation: words, stop words, light stemming, format aliases
    related  - word tables: irregular forms, derivations stemming misses, related words
    markdown - a body's headings and the text under each
    postings - one term's posting list, and the impact-ordered head kept beside it
    topk     - query evaluation: the best ``limit`` from the heads, or from whole lists
    index    - a BM25F index (posting lists with precomputed contributions, no body text kept)
    build    - builds that index fast (per-word and per-posting work in C loops)
    shortbuild - the short index (names, descriptions, tags) for a whole catalog at once, each term made when first read
    source   - catalog records -> SearchDoc (the one place that reads SKILL.md bodies)
    store    - the index persisted beside the catalog cache, used only for the very catalog it was built from
    offload  - the body phase's build handed to a worker process, and what it wrote opened as a warm start does
    worker   - that worker process: reads the bodies, builds the index, writes it (lower priority, dies with the server)

Layering (docs/architecture.md): search sits beside the runner, below the surfaces and above
the catalog; it imports ``catalog`` and the leaves (``models``, ``errors``) only, and
``surfaces.search_tool`` adapts it.
"""

from skill_mcp.search.build import build_index
from skill_mcp.search.index import Hit, SearchDoc, SearchIndex
from skill_mcp.search.source import (
    MAX_LIMIT,
    BuildAbandoned,
    index_catalog,
    search_result,
    short_index,
    stored_index,
)
from skill_mcp.search.store import StoredIndexError

# What an index built by this code holds: bump it whenever terms or scores change (the text
# normalisation, the word tables, the weights), so an index persisted by older code is
# rebuilt rather than read. 2: Snowball stems, related words, the body cap.
INDEX_VERSION = 2

__all__ = [
    "INDEX_VERSION",
    "MAX_LIMIT",
    "BuildAbandoned",
    "Hit",
    "SearchDoc",
    "SearchIndex",
    "StoredIndexError",
    "build_index",
    "index_catalog",
    "search_result",
    "short_index",
    "stored_index",
]
