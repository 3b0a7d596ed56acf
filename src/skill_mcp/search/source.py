"""Turn catalog records into ``SearchDoc`` values (reads each SKILL.md body once).

This is the only part of ``search`` that touches the disk. A body that can no longer be read
(the file changed or vanished since the scan) is indexed without its body: search degrades,
it does not fail.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from skill_mcp.catalog.files import SKILL_MD, read_body, read_skill_file, skill_uri
from skill_mcp.catalog.frontmatter import FrontmatterError, split
from skill_mcp.errors import SkillMcpError
from skill_mcp.models import Catalog, Skill
from skill_mcp.search.build import build_sorted
from skill_mcp.search.index import SearchDoc, SearchIndex, _idf
from skill_mcp.search.text import query_terms, stem

BODY_MAX_BYTES = 256 * 1024  # past this, the body is ranked on its first 256 KiB only
MAX_LIMIT = 50
# A best hit whose confidence is below this is reported as a weak match: the closest skills,
# not an answer (docs/search.md shows how it was chosen).
GOOD_MATCH = 0.3


def _tag_values(frontmatter: Mapping[str, Any], skill: Skill) -> tuple[str, ...]:
    """Tags, phase and string metadata values: the short labels an author attached."""
    out: list[str] = list(skill.tags)
    if skill.phase:
        out.append(skill.phase)
    for key in ("tags", "keywords"):
        value = frontmatter.get(key)
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            out.extend(str(v) for v in value if isinstance(v, str | int | float))
    meta = frontmatter.get("metadata")
    if isinstance(meta, Mapping):
        out.extend(str(v) for k, v in sorted(meta.items()) if isinstance(v, str) and k not in ("version",))
    return tuple(out)


def _body(skill: Skill) -> str:
    """The body of SKILL.md, as ``read_body`` gives it, decoding only the body.

    When the frontmatter still ends where the scan saw it end (parsing just the bytes before
    ``body_offset`` finds the closing line exactly there), the body is the rest of the file;
    otherwise the whole file is split again, as ``read_body`` does.
    """
    raw = read_skill_file(skill, SKILL_MD, max_bytes=1024 * 1024)
    try:
        if split(raw[:skill.body_offset]).body_offset == skill.body_offset:
            return raw[skill.body_offset:].decode("utf-8")
    except FrontmatterError:
        pass
    return read_body(skill, max_bytes=1024 * 1024)


def doc_for(skill: Skill) -> SearchDoc:
    fm = skill.frontmatter
    title = fm.get("name")
    try:
        body = _body(skill)[:BODY_MAX_BYTES]
    except (SkillMcpError, OSError, UnicodeDecodeError):
        body = ""
    return SearchDoc(
        name=skill.name,
        title=title if isinstance(title, str) else "",
        description=skill.description,
        tags=_tag_values(fm, skill),
        body=body,
    )


def docs_from_catalog(catalog: Catalog) -> Iterator[SearchDoc]:
    # In name order, one at a time: the builder numbers docs in the order they come, and only
    # one body is held at once.
    for skill in sorted(catalog.skills.values(), key=lambda s: s.name):
        yield doc_for(skill)


def index_catalog(catalog: Catalog) -> SearchIndex:
    """Build the search index for one catalog generation."""
    return build_sorted(docs_from_catalog(catalog))


def _ideal(index: SearchIndex, qterms: Mapping[str, tuple[float, str]]) -> float:
    """What a skill matching every typed word of ``query`` fully would score (without the name
    boost) for the query whose terms are ``qterms``: the sum of each typed term's weight times
    its IDF. A word no skill has counts at the IDF of a term in no skill, so a query that is
    half unknown words cannot be matched with confidence by the half that is known."""
    n = len(index)
    ideal = 0.0
    for term, (weight, typed) in qterms.items():
        if stem(typed) == term:  # typed, not a related word
            post = index.postings.get(term)
            ideal += weight * _idf(n, len(post.docs) if post is not None else 0)
    return ideal


def search_result(catalog: Catalog, index: SearchIndex, query: str, limit: int) -> dict[str, Any]:
    """The structured answer to one search: ``skill_search``'s result and the CLI's ``--json``."""
    hits = []
    qterms = query_terms(query)
    ideal = _ideal(index, qterms)
    for hit in index.search_terms(qterms, min(max(limit, 1), MAX_LIMIT)):
        skill = catalog.skills.get(hit.name)
        entry: dict[str, Any] = {
            "name": hit.name,
            "description": skill.description if skill else "",
            # The one URI of a skill on every surface: its SKILL.md, readable as a resource.
            "uri": skill_uri(skill or hit.name, SKILL_MD),
            "score": hit.score,
            "confidence": round(min(1.0, hit.score / ideal), 2) if ideal > 0 else 0.0,
            "reason": hit.reason,
            "matched": list(hit.matched),
            "fields": list(hit.fields),
        }
        if hit.section:
            entry["section"] = hit.section
        hits.append(entry)
    best = hits[0]["confidence"] if hits else 0.0
    match = "good" if best >= GOOD_MATCH else "weak" if hits else "none"
    return {"query": query, "hits": hits, "count": len(hits), "searched": len(index), "match": match}
