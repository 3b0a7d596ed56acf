"""Resources: every served file as ``skill://<skill-path>/<path>``, plus directory reads.

A nested skill's ``<skill-path>`` is the enclosing skill's path followed by the directories
down to it (``skill://parent/child/SKILL.md``); a URI is answered by the deepest served skill
whose path it starts with, so a relative reference in a nested SKILL.md resolves against the
nested skill's own directory.

``resources/list`` covers the skills ``skills/list`` publishes (a skill the catalog left out of
the extension, for a frontmatter name that disagrees with its directory or any other rule a
host checks, would otherwise appear under URIs a host cannot take for a skill's files).
``resources/read`` and ``resources/directory/read`` answer for every served skill, so a URI
taken from ``skill_list`` always reads. Anything else is ``-32602``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import mcp_types as types

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import READ_CAPS
from skill_mcp.surfaces.errors import invalid_params, unknown_uri
from skill_mcp.surfaces.paging import (
    DIRECTORY_PAGE,
    RESOURCES_PAGE,
    decode_cursor,
    encode_cursor,
    stream_window,
    window,
)
from skill_mcp.surfaces.state import SKILL_MD, listed_in_skills_ext

# The file readers (catalog.files, and the catalog records behind them) are imported by the
# functions that read: building a server imports this module, and must not import those
# before the first request that reads (start-up stays independent of the number of skills).
if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Catalog, Skill, SkillFile

SCHEME = "skill://"
# A resource read returns one whole file; the extension's per-skill total bounds it (``READ_CAPS``).
MAX_READ_BYTES = READ_CAPS.file_by_resource


def parse_skill_uri(uri: str) -> str | None:
    """``skill://<path>`` -> ``<path>`` percent-decoded; None when the URI is not of that shape."""
    if not uri.startswith(SCHEME) or "?" in uri or "#" in uri:
        return None
    try:
        path = unquote(uri[len(SCHEME) :], errors="strict")
    except UnicodeDecodeError:
        return None
    if not path or path.startswith("/") or path.endswith("/"):
        return None
    return path


def lookup(catalog: Catalog, uri: str) -> tuple[Skill, str | None] | None:
    """The served skill ``uri`` addresses (the deepest one, for a nested skill) and the file's
    path inside it (None for the skill's root directory)."""
    path = parse_skill_uri(uri)
    return catalog.skill_at(path) if path is not None else None


def _skill_for(catalog: Catalog, uri: str) -> tuple[Skill, str | None]:
    import skill_mcp.catalog.files as catfiles

    found = lookup(catalog, uri)
    if found is None:
        raise unknown_uri(uri)
    skill, rel = found
    # Only the canonical spelling is served: one file, one URI.
    if catfiles.skill_uri(skill, rel) != uri:
        raise unknown_uri(uri, "the URI is not in the canonical form this server issues")
    return skill, rel


def file_resource(skill: Skill, f: SkillFile) -> types.Resource:
    import skill_mcp.surfaces.content as content

    uri = skill.uri_prefix + f.uri_path
    if f.rel == SKILL_MD:
        return types.Resource(
            uri=uri, name=skill.name, description=skill.description, mime_type=content.MARKDOWN, size=f.size
        )
    # Named by its path in the skill namespace, not by its file name: LICENSE.txt is a file of
    # hundreds of skills, and a client's resource picker shows names side by side.
    return types.Resource(
        uri=uri,
        name=f"{skill.skill_path}/{f.rel}",
        mime_type=content.guess_mime(f.rel) or "application/octet-stream",
        size=f.size,
    )


def _listed_files(catalog: Catalog) -> Iterator[tuple[Skill, SkillFile]]:
    for skill in catalog.skills.values():
        if listed_in_skills_ext(skill):
            for f in skill.files:
                yield skill, f


def _resources_page(catalog: Catalog, cursor: str | None) -> tuple[list[tuple[Skill, SkillFile]], int | None]:
    try:
        offset = decode_cursor("resources", cursor)
    except SkillMcpError as err:
        raise invalid_params(err) from None
    return stream_window(_listed_files(catalog), offset, RESOURCES_PAGE)


def resources_page_skills(catalog: Catalog, cursor: str | None) -> list[Skill]:
    """The skills whose files (and their sizes) a ``resources/list`` page carries."""
    return list({id(s): s for s, _f in _resources_page(catalog, cursor)[0]}.values())


def addressed_skills(catalog: Catalog, uri: str) -> tuple[Skill, ...]:
    """The skill a ``skill://`` URI addresses, if any (for ``catalog.filetier``)."""
    found = lookup(catalog, uri)
    return (found[0],) if found is not None else ()


def list_resources(catalog: Catalog, cursor: str | None) -> types.ListResourcesResult:
    shown, nxt = _resources_page(catalog, cursor)
    return types.ListResourcesResult(
        resources=[file_resource(s, f) for s, f in shown],
        next_cursor=encode_cursor("resources", nxt) if nxt is not None else None,
    )


def scanned_size(catalog: Catalog, uri: str) -> int:
    """The size the scan saw for the file ``uri`` names, capped as a read is (0 for no file:
    the refusal is quick). ``read_resource`` still checks the size now."""
    found = lookup(catalog, uri)
    entry = found[0].file(found[1]) if found is not None and found[1] else None
    return 0 if entry is None else min(entry.size, MAX_READ_BYTES)


def read_resource(catalog: Catalog, uri: str) -> types.ReadResourceResult:
    import skill_mcp.catalog.files as catfiles
    import skill_mcp.surfaces.content as content

    skill, rel = _skill_for(catalog, uri)
    if rel is None:
        raise unknown_uri(uri, "this is a skill directory; read its SKILL.md or use resources/directory/read")
    if skill.file(rel) is None:
        raise unknown_uri(uri, "this skill serves no file at that path")
    try:
        data = catfiles.read_skill_file(skill, rel, max_bytes=MAX_READ_BYTES)
    except SkillMcpError as err:
        raise invalid_params(err) from None
    enc = content.encode(rel, data)
    mime = content.MARKDOWN if rel == SKILL_MD else enc.mime_type
    item: types.TextResourceContents | types.BlobResourceContents
    if enc.text is not None:
        item = types.TextResourceContents(uri=uri, mime_type=mime, text=enc.text)
    else:
        item = types.BlobResourceContents(uri=uri, mime_type=mime, blob=enc.blob or "")
    return types.ReadResourceResult(contents=[item])


def _directories(skill: Skill) -> set[str]:
    dirs: set[str] = set()
    for f in skill.files:
        parent = PurePosixPath(f.rel).parent
        while str(parent) != ".":
            dirs.add(str(parent))
            parent = parent.parent
    return dirs


def _children(skill: Skill, rel: str | None) -> list[types.Resource]:
    import skill_mcp.catalog.files as catfiles
    import skill_mcp.surfaces.content as content

    base = PurePosixPath(rel) if rel else PurePosixPath(".")
    out: list[types.Resource] = []
    for d in sorted(_directories(skill)):
        if PurePosixPath(d).parent == base:
            out.append(
                types.Resource(
                    uri=catfiles.skill_uri(skill, d), name=PurePosixPath(d).name, mime_type=content.DIRECTORY_MIME
                )
            )
    out.extend(file_resource(skill, f) for f in skill.files if PurePosixPath(f.rel).parent == base)
    return out


def directory_uri(uri: str) -> str:
    """``skill://pdf/scripts/`` -> ``skill://pdf/scripts``: the same directory.

    The Skills extension writes directory URIs without a trailing slash, and this server issues
    them so; but ``scripts/`` is how a person or a model writes a directory, so one trailing
    slash is accepted on a read. Only one: ``scripts//`` names nothing.
    """
    return uri[:-1] if uri.endswith("/") and not uri.endswith("//") else uri


def read_directory(catalog: Catalog, uri: str, cursor: str | None) -> dict[str, Any]:
    skill, rel = _skill_for(catalog, directory_uri(uri))
    if rel is not None and rel not in _directories(skill):
        raise unknown_uri(uri, "not a directory resource; read files with resources/read")
    try:
        offset = decode_cursor("directory", cursor)
    except SkillMcpError as err:
        raise invalid_params(err) from None
    children = _children(skill, rel)
    shown, nxt = window(children, offset, DIRECTORY_PAGE)
    out: dict[str, Any] = {
        "resources": [r.model_dump(by_alias=True, mode="json", exclude_none=True) for r in shown],
    }
    if nxt is not None:
        out["nextCursor"] = encode_cursor("directory", nxt)
    return out
