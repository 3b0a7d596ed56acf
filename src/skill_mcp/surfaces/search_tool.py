"""The ``skill_search`` tool: rank skills for the words a person would type.

The index is built lazily, on the first search against a catalog generation, so it adds
nothing to the server's cold start; the search package itself is imported by that first
search, not when the tool is listed. A reload swaps the catalog, and the next search builds a
new index for it. The build runs in a worker thread so the event loop keeps answering other
requests meanwhile; a lock makes concurrent first searches share one build. With nothing
persisted and a large catalog, that first build holds only the short fields and the bodies
follow in a worker process, or failing that a background thread (``SearchState``).

Importing this module imports neither the SDK nor anyio: ``surfaces.stdio.early`` answers a
search with this state and handler before the SDK is loaded (``hits_text`` is its text block).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skill_mcp.surfaces.registry import ToolCall, ToolSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Catalog
    from skill_mcp.search import SearchIndex

log = logging.getLogger("skill_mcp.search")

NAME = "skill_search"
DEFAULT_LIMIT = 10
MAX_QUERY_CHARS = 1000
# ``skill_mcp.search.MAX_LIMIT``, repeated so that listing the tool does not import the index
# code (tests/surfaces/test_tool_schemas.py holds the two equal).
MAX_LIMIT = 50
# From this many skills, a first search with nothing persisted answers from names, descriptions
# and tags while the bodies are indexed in the background; a smaller catalog is indexed whole
# at once (about 0.1 s of CPU at 128 benchmark skills: docs/search.md, "Two phases").
TWO_PHASE_FROM = 128

DESCRIPTION = (
    "Search the skills this server serves by what you want to do, in plain words (for example "
    "'fill in a pdf form'). Returns the best matches first, each with name, description, uri, score and a "
    "short reason naming the words and fields that matched. Then call skill_load with the name you pick."
)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
            "description": "what you want to do, in plain words",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "default": DEFAULT_LIMIT,
            "description": f"at most this many hits (1-{MAX_LIMIT})",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

_HIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "uri": {"type": "string"},
        "score": {"type": "number"},
        "confidence": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "how much of what the query asked for this hit covers",
        },
        "reason": {"type": "string"},
        "matched": {"type": "array", "items": {"type": "string"}},
        "fields": {"type": "array", "items": {"type": "string"}},
        "section": {"type": "string"},
    },
    "required": ["name", "description", "uri", "score", "confidence", "reason", "matched", "fields"],
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "hits": {"type": "array", "items": _HIT_SCHEMA},
        "count": {"type": "integer"},
        "searched": {"type": "integer", "description": "how many skills were searched"},
        "match": {
            "type": "string",
            "enum": ["good", "weak", "none"],
            "description": "good: the best hit fits the query; weak: the hits are only the closest; none: no hits",
        },
        "coverage": {
            "type": "string",
            "enum": ["complete", "partial"],
            "description": "complete: every field was searched; partial: skill bodies and headings are "
            "still being indexed, only names, descriptions and tags were searched",
        },
    },
    "required": ["query", "hits", "count", "searched", "match", "coverage"],
}


class SearchState:
    """The index for the catalog generation last searched. One per server, never global.

    With a cache directory, the index a previous start persisted there is used when it was
    built from exactly the catalog served (``search.store``), and a new one is persisted.

    Two phases (docs/search.md, "Two phases"): when nothing persisted fits and the catalog
    holds at least ``two_phase_from`` skills, the first search builds the index of what the
    catalog records hold (names, descriptions, tags; no file read) and answers from it, saying
    ``"coverage": "partial"``; the whole index (bodies and headings) is built in a worker
    process where one can be had (``search.offload``, waited for by a background thread) or
    else in that thread, persisted, and swapped in, after which answers are ``complete`` and
    rank exactly as a one-phase build. A smaller catalog is indexed whole at once.
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        on_build: Callable[[float], None] | None = None,
        *,
        two_phase_from: int = TWO_PHASE_FROM,
        elsewhere: bool = True,
    ) -> None:
        self._cache_dir = cache_dir
        # ``on_build(seconds)`` after each build, or opening of a persisted index (telemetry).
        self._on_build = on_build
        self._two_phase_from = two_phase_from
        # The body phase in a worker process (``search.offload``), or, failing that, here.
        self._elsewhere = elsewhere
        self._lock = threading.Lock()
        # One tuple, replaced whole: a reader without the lock sees a catalog with its own
        # index, and whether that index is complete (bodies in) or partial.
        self._built: tuple[Catalog, SearchIndex, bool] | None = None
        self._background: threading.Thread | None = None

    def built_for(self, catalog: Catalog) -> tuple[SearchIndex, bool] | None:
        """(index, complete) when an index is already built for ``catalog`` (no lock, no wait)."""
        built = self._built
        return (built[1], built[2]) if built is not None and built[0] is catalog else None

    def index_for(self, catalog: Catalog, *, damaged: SearchIndex | None = None) -> tuple[SearchIndex, bool]:
        """(index, complete) for ``catalog``; ``damaged``: the persisted index a search found
        damaged, replaced by a fresh build (unless another caller replaced it already)."""
        with self._lock:
            built = self.built_for(catalog)
            if built is not None and built[0] is not damaged:
                return built
            from skill_mcp.search import index_catalog, short_index, stored_index

            start = time.perf_counter()
            index = stored_index(catalog, self._cache_dir) if damaged is None else None
            complete = True
            if index is None and len(catalog.skills) >= self._two_phase_from:
                index, complete = short_index(catalog), False
            elif index is None:
                index = index_catalog(catalog, self._cache_dir, reuse=False)
            self._built = (catalog, index, complete)
            if not complete:
                self._start_bodies(catalog)  # after ``_built`` names this catalog: it checks that
            if self._on_build is not None:
                self._on_build(time.perf_counter() - start)
            return index, complete

    def _start_bodies(self, catalog: Catalog) -> None:
        """Have the whole index of ``catalog`` built from a background thread: by a worker
        process it waits for, or else by itself (called with the lock)."""
        thread = threading.Thread(
            target=self._build_bodies, args=(catalog,), name="skill-mcp-search-bodies", daemon=True
        )
        self._background = thread
        thread.start()

    def _build_bodies(self, catalog: Catalog) -> None:
        from skill_mcp.search import BuildAbandoned, index_catalog
        from skill_mcp.search.offload import build_elsewhere

        def current() -> bool:
            built = self._built
            return built is None or built[0] is catalog

        start = time.perf_counter()
        try:
            index = build_elsewhere(catalog, self._cache_dir, current) if self._elsewhere else None
            if index is None:  # no worker process, or none that delivered: build here, paced
                index = index_catalog(catalog, self._cache_dir, reuse=False, keep_going=current)
        except BuildAbandoned:
            return
        except Exception as exc:  # the partial index keeps answering, and says it is partial
            log.warning("search index build failed; answers stay partial", extra={"why": str(exc)[:200]})
            return
        with self._lock:
            if current():
                self._built = (catalog, index, True)
        if self._on_build is not None:
            self._on_build(time.perf_counter() - start)

    def wait_complete(self, timeout: float | None = None) -> bool:
        """Wait for the background build, if one runs; True when none is left running."""
        thread = self._background
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    async def answer(self, catalog: Catalog, query: str, limit: int) -> dict[str, Any]:
        """``search_result`` for ``catalog``: the index built (or opened) once per catalog, in a
        worker thread so the event loop keeps answering; every later search reads it on the
        loop (a query costs less than the thread hop)."""
        built = self.built_for(catalog)
        if built is None:
            import anyio  # only here: an answer from a built index needs no event loop (early_calls)

            built = await anyio.to_thread.run_sync(self.index_for, catalog)
        index, complete = built
        from skill_mcp.search import StoredIndexError, search_result  # loaded by the index build above

        try:
            return search_result(catalog, index, query, limit, complete=complete)
        except StoredIndexError as exc:
            # A persisted index whose postings proved damaged is never an answer: build afresh.
            log.info("search index damaged; rebuilt", extra={"why": str(exc)[:200]})
            import anyio

            fresh, complete = await anyio.to_thread.run_sync(partial(self.index_for, catalog, damaged=index))
            return search_result(catalog, fresh, query, limit, complete=complete)


def render_hits(out: dict[str, Any]) -> list[Any]:
    """``hits_text`` as the result's one text block."""
    import mcp_types as types

    return [types.TextContent(type="text", text=hits_text(out))]


def hits_text(out: dict[str, Any]) -> str:
    """The hits one a line, best first, for the model: the same facts without JSON on each hit."""
    lines = [
        f"{out['count']} hit(s) for {json.dumps(out['query'], ensure_ascii=False)} among {out['searched']} "
        "skill(s), best first; load one with skill_load(name)."
    ]
    if out["match"] == "weak":
        lines.append("No skill matches this query well: these are only the closest (low confidence).")
    if out.get("coverage") == "partial":
        lines.append(
            "Skill bodies are still being indexed: only names, descriptions and tags were searched; "
            "ask again shortly for a complete answer."
        )
    lines += [
        f"{i}. {hit['name']} (score {hit['score']}, confidence {hit['confidence']}): {hit['description']} "
        f"[{hit['reason']}]"
        for i, hit in enumerate(out["hits"], 1)
    ]
    return "\n".join(lines)


def search_tool_spec(state: SearchState | None = None) -> ToolSpec:
    state = state or SearchState()

    async def handler(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
        return await state.answer(call.catalog, str(args["query"]), int(args.get("limit", DEFAULT_LIMIT)))

    return ToolSpec(
        name=NAME,
        title="Search skills",
        description=DESCRIPTION,
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
        handler=handler,
        render=render_hits,
        annotations={"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
    )
