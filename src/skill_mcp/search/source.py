"""Turn catalog records into ``SearchDoc`` values (reads each SKILL.md body once).

This is the only part of ``search`` that touches the disk. A body that can no longer be read
(the file changed or vanished since the scan) is indexed without its body: search degrades,
it does not fail.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

from skill_mcp.catalog.cache import racy
from skill_mcp.catalog.cached import CachedFiles, CachedFrontmatter, frontmatter_text
from skill_mcp.catalog.cachefile import marker_time
from skill_mcp.catalog.files import SKILL_MD, locate, read_body, read_located, skill_uri
from skill_mcp.catalog.frontmatter import FrontmatterError, split
from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import READ_CAPS
from skill_mcp.models import Catalog, Skill
from skill_mcp.search.build import build_sorted
from skill_mcp.search.index import SearchDoc, SearchIndex, _idf
from skill_mcp.search.shortbuild import build_short
from skill_mcp.search.store import (
    KeyHasher,
    NowFn,
    Stamp,
    catalog_key,
    index_file,
    key_columns,
    load,
    save,
    stamp_now,
)
from skill_mcp.search.text import QueryTerm, query_terms, stem

BODY_MAX_BYTES = 256 * 1024  # past this, the body is ranked on its first 256 KiB only
MAX_LIMIT = 50
# A best hit whose confidence is below this is reported as a weak match: the closest skills,
# not an answer (docs/search.md shows how it was chosen).
GOOD_MATCH = 0.3

Fields = tuple[str, str, str, tuple[str, ...]]
# What a build needs of one skill, in doc id order: its fields, what its key covers, the skill
# (whose SKILL.md body is read). A build elsewhere is sent these (``search.offload``).
KeyFields = tuple[str, str, bytes, tuple[str, ...], str | None, int]
Item = tuple[Fields, KeyFields, Skill]


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
            out.extend([str(v) for v in value if isinstance(v, (str, int, float))])
    meta = frontmatter.get("metadata")
    if isinstance(meta, (dict, Mapping)):  # a dict is told without the ABC's check
        out.extend([str(v) for k, v in sorted(meta.items()) if isinstance(v, str) and k != "version"])
    return tuple(out)


def _body(skill: Skill) -> tuple[str, Stamp]:
    """The body of SKILL.md, as ``read_body`` gives it, decoding only the body; and the stamp
    of the file read (taken before reading it, as the persisted index's key needs).

    When the frontmatter still ends where the scan saw it end (parsing just the bytes before
    ``body_offset`` finds the closing line exactly there), the body is the rest of the file;
    otherwise the whole file is split again, as ``read_body`` does.
    """
    with locate(skill, SKILL_MD) as found:
        st = found.st
        raw = read_located(found, max_bytes=READ_CAPS.skill_md)
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    try:
        if split(raw[: skill.body_offset]).body_offset == skill.body_offset:
            return raw[skill.body_offset :].decode("utf-8"), stamp
    except FrontmatterError:
        pass
    return read_body(skill, max_bytes=READ_CAPS.skill_md), stamp


def _frontmatter(skill: Skill) -> Mapping[str, Any]:
    """The record's frontmatter; a cached one whose text does not decode (a forged cache entry:
    ``catalog.cached``) is searched as empty, as an unreadable body is: search degrades, it does
    not fail (the file tier reloads that skill for the answers that carry its frontmatter)."""
    frontmatter = skill.frontmatter
    if isinstance(frontmatter, CachedFrontmatter):
        try:
            return frontmatter.decoded()
        except ValueError:
            return {}
    return frontmatter


def _fields(skill: Skill) -> Fields:
    """What the index takes from the catalog record: name, frontmatter name, description, tags."""
    frontmatter = _frontmatter(skill)
    title = frontmatter.get("name")
    return skill.name, title if isinstance(title, str) else "", skill.description, _tag_values(frontmatter, skill)


def _key_fields(skill: Skill) -> KeyFields:
    """What the index's key covers of a record: everything ``_fields`` derives its fields from
    (the name, the description, the tags and phase, and the whole frontmatter as its JSON text:
    the text a cached record holds, so a warm start's key decodes no frontmatter) and where the
    body starts. A superset of what the index takes: any change to it is a rebuild."""
    try:
        text = frontmatter_text(skill.frontmatter)
    except (TypeError, ValueError):  # a scanned frontmatter JSON cannot hold as UTF-8 text
        text = repr(dict(skill.frontmatter)).encode("utf-8", "surrogatepass")
    return (
        skill.name,
        skill.description,
        text,
        skill.tags,
        skill.phase,
        skill.body_offset,
    )


def items(skills: list[Skill]) -> Iterator[Item]:
    for skill in skills:
        yield _fields(skill), _key_fields(skill), skill


def _doc(skill: Skill, fields: Fields | None = None) -> tuple[SearchDoc, Stamp | None]:
    name, title, description, tags = fields or _fields(skill)
    try:
        body, stamp = _body(skill)
    except (SkillMcpError, OSError, UnicodeDecodeError):
        body, stamp = "", None
    return SearchDoc(name=name, title=title, description=description, tags=tags, body=body[:BODY_MAX_BYTES]), stamp


def doc_for(skill: Skill) -> SearchDoc:
    return _doc(skill)[0]


def short_doc(skill: Skill) -> SearchDoc:
    """What the catalog record alone says of a skill (name, frontmatter name, description, tags):
    no file is read, so a first search need not wait for every body."""
    name, title, description, tags = _fields(skill)
    return SearchDoc(name=name, title=title, description=description, tags=tags)


def short_index(catalog: Catalog) -> SearchIndex:
    """The first phase of a two-phase build: names, descriptions and tags, no body and no
    heading (both need SKILL.md read: docs/search.md, "Two phases"). Same weights and scores
    as the general builder with the body and heading fields empty (``shortbuild``: built for
    the whole catalog at once, each term's postings made when a query first reads it)."""
    return build_short(map(_fields, in_order(catalog)))


def in_order(catalog: Catalog) -> list[Skill]:
    return sorted(catalog.skills.values(), key=lambda s: s.name)


def docs_from_catalog(catalog: Catalog) -> Iterator[SearchDoc]:
    # In name order, one at a time: the builder numbers docs in the order they come, and only
    # one body is held at once.
    for skill in in_order(catalog):
        yield doc_for(skill)


class _Keyed:
    """The docs of a build, keyed as they stream past: whether every stamp may be written."""

    def __init__(self, t0_ns: int | None) -> None:
        self.key = KeyHasher()
        self.writable = t0_ns is not None
        self._t0 = t0_ns or 0

    def docs(self, items: Iterable[Item]) -> Iterator[SearchDoc]:
        for fields, key_fields, skill in items:
            doc, stamp = _doc(skill, fields)
            self.key.add(key_fields, stamp)
            if stamp is None or racy(stamp[3], self._t0):
                self.writable = False
            yield doc


def build_keyed(items: Iterable[Item], t0_ns: int | None) -> tuple[SearchIndex, str, bool]:
    """The index of ``items`` (bodies read), its key, and whether it may be persisted (every
    SKILL.md read, none with a racy stamp against ``t0_ns``): what a build elsewhere does."""
    keyed = _Keyed(t0_ns)
    index = build_sorted(keyed.docs(items))
    return index, keyed.key.hexdigest(), keyed.writable


def current_key(skills: list[Skill], key_fields: Sequence[KeyFields] | None = None) -> str:
    """The key the index of ``skills`` has if their SKILL.md files are what the catalog's build
    found them to be: a search answer is checked against the listing tier at the build
    (docs/architecture.md, "The catalog cache"), which for a record taken from the catalog
    cache is the stamp of SKILL.md that build checked (``CachedFiles.skill_md``: no second
    ``lstat``); a record scanned from disk is stamped now. ``key_fields``: each skill's
    ``_key_fields``, when the caller made them already (a record never changes)."""
    columns = _key_columns(skills) if key_fields is None else key_columns(key_fields)
    stamps = [_checked(skill.files) or stamp_now(skill.prefix + SKILL_MD) for skill in skills]
    return catalog_key(columns, stamps)


def _key_columns(skills: list[Skill]) -> list[Sequence[Any]]:
    """``_key_fields`` of every skill, as columns (one C-level pass a field)."""
    try:
        texts = list(map(frontmatter_text, map(attrgetter("frontmatter"), skills)))
    except (TypeError, ValueError):  # a frontmatter JSON cannot hold: as ``_key_fields`` says it
        return key_columns(list(map(_key_fields, skills)))
    return [
        list(map(attrgetter("name"), skills)),
        list(map(attrgetter("description"), skills)),
        texts,
        list(map(attrgetter("tags"), skills)),
        list(map(attrgetter("phase"), skills)),
        list(map(attrgetter("body_offset"), skills)),
    ]


def _checked(files: object) -> Stamp | None:
    return files.skill_md if isinstance(files, CachedFiles) else None


def _counted(docs: Iterator[SearchDoc], total: int, progress: Callable[[int, int], None] | None) -> Iterator[SearchDoc]:
    if progress is None:
        yield from docs
        return
    done = 0
    for doc in docs:
        progress(done, total)
        done += 1
        yield doc
    progress(done, total)


def _paced(docs: Iterator[SearchDoc], keep_going: Callable[[], bool]) -> Iterator[SearchDoc]:
    """``docs``, offering the GIL to other threads after each one (a background build must not
    hold the event loop for a whole switch interval at a time), and stopping with
    ``BuildAbandoned`` once ``keep_going()`` is false (the catalog was replaced meanwhile)."""
    for doc in docs:
        if not keep_going():
            raise BuildAbandoned
        time.sleep(0)
        yield doc


class BuildAbandoned(Exception):
    """A background build stopped because its catalog is no longer the one served."""


def stored_index(
    catalog: Catalog, cache_dir: Path | None, key_fields: Sequence[KeyFields] | None = None
) -> SearchIndex | None:
    """The index persisted in ``cache_dir`` for exactly this catalog and these SKILL.md files
    (``search.store``), or None: nothing there, built for something else, or damaged.
    ``key_fields``: as for ``current_key``."""
    if cache_dir is None or not catalog.roots:
        return None
    path = index_file(cache_dir, catalog.roots)
    if not os.path.lexists(path):
        return None  # nothing persisted: no need for the key (an lstat per skill)
    return load(path, current_key(in_order(catalog), key_fields))


def index_catalog(
    catalog: Catalog,
    cache_dir: Path | None = None,
    *,
    reuse: bool = True,
    now_ns: NowFn | None = None,
    progress: Callable[[int, int], None] | None = None,
    keep_going: Callable[[], bool] | None = None,
) -> SearchIndex:
    """The search index for one catalog generation.

    With ``cache_dir``, the index persisted there is used when it was built from exactly this
    catalog and these SKILL.md files (``search.store``); otherwise (or with ``reuse`` off, after
    a persisted one proved damaged) it is built and persisted for the next start. ``now_ns``
    is the filesystem clock (tests inject one). ``progress(done, total)`` is called as skills
    are indexed, when an index is built. ``keep_going``: a build in the background, paced (see
    ``_paced``), which raises ``BuildAbandoned`` once ``keep_going()`` turns false.
    """
    total = len(catalog.skills)

    def paced(docs: Iterator[SearchDoc]) -> Iterator[SearchDoc]:
        return docs if keep_going is None else _paced(docs, keep_going)

    if cache_dir is None or not catalog.roots:
        return build_sorted(paced(_counted(docs_from_catalog(catalog), total, progress)))
    skills = in_order(catalog)
    path = index_file(cache_dir, catalog.roots)
    if reuse and (stored := load(path, current_key(skills))) is not None:
        return stored
    keyed = _Keyed((now_ns or marker_time)(cache_dir))
    index = build_sorted(paced(_counted(keyed.docs(items(skills)), total, progress)))
    if keyed.writable:
        save(path, keyed.key.hexdigest(), index)
    return index


def _ideal(index: SearchIndex, qterms: Mapping[str, QueryTerm]) -> float:
    """What a skill matching every typed word of ``query`` fully would score (without the name
    boost) for the query whose terms are ``qterms``: the sum of each typed term's weight times
    its IDF. A word no skill has counts at the IDF of a term in no skill, so a query that is
    half unknown words cannot be matched with confidence by the half that is known."""
    n = len(index)
    ideal = 0.0
    for term, (weight, typed, _, _) in qterms.items():
        if stem(typed) == term:  # typed, not a related word
            post = index.postings.get(term)
            ideal += weight * _idf(n, len(post.docs) if post is not None else 0)
    return ideal


def search_result(
    catalog: Catalog, index: SearchIndex, query: str, limit: int, *, complete: bool = True
) -> dict[str, Any]:
    """The structured answer to one search: ``skill_search``'s result and the CLI's ``--json``.
    ``complete``: False for an answer from ``short_index`` (its ``coverage`` says ``partial``)."""
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
    return {
        "query": query,
        "hits": hits,
        "count": len(hits),
        "searched": len(index),
        "match": match,
        "coverage": "complete" if complete else "partial",
    }
