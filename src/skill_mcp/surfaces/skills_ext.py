"""The MCP Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``).

``skills/list`` pages over the skills the catalog did not exclude (an entry is never split
across pages; ``docs/surfaces.md`` lists the rules that exclude one); ``skills/get`` answers for
one ``skill://<skill-path>/SKILL.md``, a nested skill's path starting with the enclosing skill's.
``for_era`` adds ``resultType``, ``ttlMs`` and ``cacheScope`` where the era's schema defines them
(2026-07-28), never on handshake-era results. ``resources/directory/read`` lives in
``surfaces.resources``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from skill_mcp.errors import SkillMcpError
from skill_mcp.surfaces.errors import invalid_params, unknown_uri
from skill_mcp.surfaces.paging import SKILLS_PAGE, decode_cursor, encode_cursor, window
from skill_mcp.surfaces.resources import lookup
from skill_mcp.surfaces.state import SKILL_MD, listed_in_skills_ext

# The file readers (catalog.files, and the catalog records behind them) are imported by the
# functions that read: building a server imports this module, and must not import those
# before the first request that reads (start-up stays independent of the number of skills).
if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog import files as catfiles
    from skill_mcp.models import Catalog, Skill, SkillFile

EXTENSION_ID = "io.modelcontextprotocol/skills"
CAPABILITY = {"directoryRead": True}
TTL_MS = 60_000
CACHE_SCOPE = "public"

log = logging.getLogger("skill_mcp.skills")


class SkillsListParams(types.PaginatedRequestParams):
    pass


class SkillsGetParams(types.RequestParams):
    uri: str


class DirectoryReadParams(types.PaginatedRequestParams):
    uri: str


def skill_entry(memo: catfiles.DigestMemo, skill: Skill, *, known_only: bool = False) -> dict[str, Any] | None:
    """The SEP-2640 entry for ``skill``; with ``known_only``, None unless no file needs hashing."""
    # Size and digest of the same bytes, never stale.
    if known_only:
        files = memo.known_files(skill)
        if files is None:
            return None
    else:
        import skill_mcp.catalog.files as catfiles

        files = [(f, (info := catfiles.file_info(memo, skill, f)).size, info.digest) for f in skill.files]
    return _entry(skill, files)


def _entry(skill: Skill, files: Iterable[tuple[SkillFile, int, str]]) -> dict[str, Any]:
    base = skill.uri_prefix
    resources = [{"uri": base + f.uri_path, "digest": digest, "size": size} for f, size, digest in files]
    frontmatter = skill.frontmatter
    # A copy, so that the record's own mapping never leaves; a cached one's decoded dict is
    # copied at C speed rather than key by key through the Mapping protocol.
    decoded = getattr(frontmatter, "decoded", None)
    front = dict(frontmatter if decoded is None else decoded())
    return {"uri": base + SKILL_MD, "frontmatter": front, "resources": resources}


def for_era(body: dict[str, Any], protocol_version: str | None, *, cacheable: bool = True) -> dict[str, Any]:
    """``body`` as the era's schema defines the result.

    From 2026-07-28 results carry ``resultType`` and cacheable ones ``ttlMs`` and ``cacheScope``
    (required there); the handshake-era schemas define none of the three, so they are left out.
    """
    if protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return body
    out = {"resultType": "complete", **body}
    if cacheable:
        out.update(ttlMs=TTL_MS, cacheScope=CACHE_SCOPE)
    return out


def _window(catalog: Catalog, cursor: str | None) -> tuple[Sequence[Skill], int | None]:
    try:
        offset = decode_cursor("skills", cursor)
    except SkillMcpError as err:
        raise invalid_params(err) from None
    return window(catalog.extension_listed, offset, SKILLS_PAGE)


def _page(entries: list[dict[str, Any]], nxt: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"skills": entries}
    if nxt is not None:
        body["nextCursor"] = encode_cursor("skills", nxt)
    return body


def page_skills(catalog: Catalog, cursor: str | None) -> tuple[Skill, ...]:
    """The skills a ``skills/list`` page carries entries of (for ``catalog.filetier``)."""
    return tuple(_window(catalog, cursor)[0])


def known_page(memo: catfiles.DigestMemo, catalog: Catalog, cursor: str | None) -> dict[str, Any] | None:
    """One page of ``skills/list`` from one ``lstat`` per file (``filetier.known_checked``: the
    file tier and the memo checked on the same ``lstat``), or None when a file of the page fails
    either check or needs hashing: then the answer is made the reference way (``files_checked``,
    which reloads what changed, then ``list_skills``), and is the same."""
    from skill_mcp.catalog.filetier import known_checked

    shown, nxt = _window(catalog, cursor)
    entries = []
    for skill in shown:
        files = known_checked(memo, skill)
        if files is None:
            return None
        entries.append(_entry(skill, files))
    return _page(entries, nxt)


def list_skills(
    memo: catfiles.DigestMemo, catalog: Catalog, cursor: str | None, *, known_only: bool = False
) -> dict[str, Any] | None:
    """One page of ``skills/list``; with ``known_only``, None when a file of the page needs hashing."""
    shown, nxt = _window(catalog, cursor)
    entries = []
    for skill in shown:
        try:
            entry = skill_entry(memo, skill, known_only=known_only)
        except SkillMcpError as err:
            # A file vanished or changed under the scan: an entry must be complete, so the skill
            # sits this page out and says why in the log rather than publishing a partial manifest.
            log.warning("skill left out of skills/list", extra={"skill": skill.name, "reason": str(err.reason)})
            continue
        if entry is None:
            return None
        entries.append(entry)
    return _page(entries, nxt)


def get_skill(
    memo: catfiles.DigestMemo, catalog: Catalog, uri: str, *, known_only: bool = False
) -> dict[str, Any] | None:
    """``skills/get``; with ``known_only``, None when a file of the skill needs hashing."""
    import skill_mcp.catalog.files as catfiles

    found = lookup(catalog, uri)
    skill = found[0] if found is not None and found[1] == SKILL_MD else None
    if skill is None or catfiles.skill_uri(skill, SKILL_MD) != uri:
        raise unknown_uri(uri, f"no skill is served at {uri}")
    if not listed_in_skills_ext(skill):
        raise unknown_uri(
            uri,
            "this skill is served by the tools only, not through the skills extension",
            excludedBecause=str(skill.skills_list_excluded),
        )
    try:
        entry = skill_entry(memo, skill, known_only=known_only)
    except SkillMcpError as err:
        raise invalid_params(err) from None
    return None if entry is None else {"skill": entry}
