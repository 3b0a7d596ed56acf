"""``skill_list``, ``skill_load`` and ``skill_file``: the read tools.

They carry the whole experience for a client that shows the model nothing but tools, so
they say everything the other surfaces say: names, descriptions, URIs, the manifest with
digests, declared scripts and their state, and every problem the scan found.

Importing this module imports neither the SDK nor anyio (each is imported where a read hops to a
worker thread): ``surfaces.stdio.early`` calls ``skill_list`` before the SDK is loaded.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import MIB, READ_CAPS
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces import schemas
from skill_mcp.surfaces.paging import (
    DEFAULT_LIST_LIMIT,
    LIST_PAGE_BYTES,
    MAX_PROBLEMS_LISTED,
    decode_cursor,
    encode_cursor,
    fit,
    page,
)
from skill_mcp.surfaces.registry import ToolCall, ToolSpec
from skill_mcp.surfaces.render import (
    SKILL_MD_TEXT,
    skill_file_blocks,
    skill_file_metadata,
    skill_list_blocks,
    skill_list_line,
    skill_list_text,
    skill_load_blocks,
    skill_load_metadata,
)
from skill_mcp.surfaces.state import (
    INLINE_READ_BYTES,
    SKILL_MD,
    file_record,
    files_checked,
    find_skill,
    hold_answer_bytes,
)

# The file readers (catalog.files, and the catalog records behind them) are imported by the
# functions that read: building a server imports this module, and must not import those
# before the first request that reads (start-up stays independent of the number of skills).
if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog import files as catfiles
    from skill_mcp.models import Catalog, Skill

MAX_PATHS = 8
MAX_FILE_BYTES = READ_CAPS.file_by_tool
MAX_BATCH_BYTES = READ_CAPS.batch_by_tool


def compact_entry(call: ToolCall, skill: Skill) -> dict[str, Any]:
    import skill_mcp.catalog.files as catfiles

    # The script mappings are the runner's, shared between answers: put in as they are, never
    # mutated (the answer is only serialized).
    entry: dict[str, Any] = {
        "name": skill.name,
        "description": skill.description,
        "uri": catfiles.skill_uri(skill, SKILL_MD),
        "fileCount": len(skill.files),
        "scripts": call.scripts.scripts(skill),
        **call.scripts.skill_extras(skill),
    }
    if skill.skills_list_excluded is not None:
        entry["skillsListExcluded"] = str(skill.skills_list_excluded)
    return entry


def all_problems(call: ToolCall, catalog: Catalog) -> list[dict[str, Any]]:
    return [p.to_dict() for p in (*catalog.problems, *call.scripts.problems())]


async def skill_list(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    limit = int(args.get("limit", DEFAULT_LIST_LIMIT))
    offset = decode_cursor("skill_list", args.get("cursor"))
    names = call.catalog.names()
    start, stop, _ = page(len(names), offset, limit)
    problems = all_problems(call, call.catalog)
    entries = [compact_entry(call, call.catalog.skills[n]) for n in names[start:stop]]
    out: dict[str, Any] = {
        "skills": [],
        "total": len(names),
        "problemCount": len(problems),
        **call.scripts.grant(),
    }
    # Problems ride on the first page only: later pages would repeat them verbatim.
    if offset == 0:
        out["problems"] = listed_problems(problems)
        if len(out["problems"]) < len(problems):
            out["problemsByReason"] = dict(Counter(str(p["reason"]) for p in problems))
    if "limit" not in args:
        entries = entries[: fit(_answer_bytes(out), (_entry_bytes(e) for e in entries), LIST_PAGE_BYTES)]
    out["skills"] = entries
    stop = start + len(entries)
    if stop < len(names):
        out["nextCursor"] = encode_cursor("skill_list", stop)
    return out


def listed_problems(problems: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The problems a first page lists: all of them up to ``MAX_PROBLEMS_LISTED``; past it, that
    many, the errors first (each group in the scan's order)."""
    if len(problems) <= MAX_PROBLEMS_LISTED:
        return problems
    errors = [p for p in problems if p.get("level", "error") == "error"]
    warnings = [p for p in problems if p.get("level", "error") != "error"]
    return (errors + warnings)[:MAX_PROBLEMS_LISTED]


def _entry_bytes(entry: dict[str, Any]) -> int:
    """What one entry adds to an answer: its JSON in structuredContent and its line of text."""
    return len(json.dumps(entry, ensure_ascii=False).encode()) + len(skill_list_line(entry).encode()) + 2


def _answer_bytes(out: dict[str, Any]) -> int:
    """The page without its entries, both forms, with room for the cursor and the head line."""
    text = skill_list_text({**out, "nextCursor": "c" * 24})
    return len(json.dumps(out, ensure_ascii=False).encode()) + len(text.encode()) + 64


async def _checked_skill(call: ToolCall, name: str) -> Skill:
    """The served skill ``name``, its file tier checked: its manifest and reads carry file facts."""
    catalog = await files_checked(call.catalog, lambda c: (find_skill(c, name),), call.reload)
    return find_skill(catalog, name)


async def skill_load(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    skill = await _checked_skill(call, args["name"])
    # On the event loop when every digest is known and SKILL.md is small; hashing and large
    # reads are blocking disk work and go to a worker thread.
    out = _load(call, skill, known_only=True)
    if out is None:
        import anyio

        skill_md = skill.file(SKILL_MD)
        await hold_answer_bytes(call.answers, skill_md.size if skill_md is not None else 0, call.request)
        out = await anyio.to_thread.run_sync(_load_all, call, skill)
    return out


def _load_all(call: ToolCall, skill: Skill) -> dict[str, Any]:
    out = _load(call, skill, known_only=False)
    if out is None:  # cannot happen: without known_only every file is hashed
        raise RuntimeError("skill_load came back empty")
    return out


def _load(call: ToolCall, skill: Skill, *, known_only: bool) -> dict[str, Any] | None:
    import skill_mcp.catalog.files as catfiles
    import skill_mcp.surfaces.content as content

    files = []
    for f in skill.files:
        record = file_record(call.memo, skill, f, known_only=known_only)
        if record is None or (known_only and f.rel == SKILL_MD and record["size"] > INLINE_READ_BYTES):
            return None
        record["mimeType"] = (
            content.MARKDOWN if f.rel == SKILL_MD else (content.guess_mime(f.rel) or "application/octet-stream")
        )
        files.append(record)
    return {
        "name": skill.name,
        "uri": catfiles.skill_uri(skill, SKILL_MD),
        "description": skill.description,
        "frontmatter": dict(skill.frontmatter),
        SKILL_MD_TEXT: _skill_md_text(skill),
        "files": files,
        "scripts": call.scripts.scripts(skill),
    }


def _skill_md_text(skill: Skill) -> str:
    """SKILL.md as it is now, whole (frontmatter and instructions), checked as every read is."""
    import skill_mcp.catalog.files as catfiles

    raw = catfiles.read_skill_file(skill, SKILL_MD, max_bytes=MAX_FILE_BYTES)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillMcpError(
            Refusal.FILE_CHANGED, "SKILL.md changed since the scan: it is no longer UTF-8", {"path": SKILL_MD}
        ) from None


def closest_files(skill: Skill, rel: str, limit: int = 3) -> list[str]:
    """Files the skill serves that ``rel`` may have meant: the same path in another case
    (``FORMS.md`` for ``forms.md``) first, then the paths difflib finds alike."""
    from difflib import get_close_matches

    served = [f.rel for f in skill.files]
    same = [p for p in served if p.lower() == rel.lower()]
    by_lower = {p.lower(): p for p in served}
    alike = [by_lower[p] for p in get_close_matches(rel.lower(), list(by_lower), n=limit, cutoff=0.6)]
    return list(dict.fromkeys(same + alike))[:limit]


def _entry_error(rel: str, err: SkillMcpError, skill: Skill | None = None) -> dict[str, Any]:
    error = err.to_dict()
    if skill is not None and err.reason == Refusal.NOT_FOUND:
        closest = closest_files(skill, rel)
        if closest:
            error["detail"] = f"{err.detail} (closest: {', '.join(closest)})"
            error["closest"] = closest
    return {"path": rel, "error": error}


def _locate(skill: Skill, rel: str) -> catfiles.Located:
    """Check one requested path (string, served file, resolution) and its size; read nothing."""
    import skill_mcp.catalog.files as catfiles

    found = catfiles.locate(skill, rel)
    if found.size > MAX_FILE_BYTES:
        found.close()
        raise SkillMcpError(
            Refusal.FILE_TOO_LARGE,
            f"the file is {found.size} bytes; the limit is {MAX_FILE_BYTES}",
            {"path": rel, "size": found.size, "limit": MAX_FILE_BYTES},
        )
    return found


def _read_entry(skill: Skill, found: catfiles.Located) -> dict[str, Any]:
    import skill_mcp.catalog.files as catfiles
    import skill_mcp.surfaces.content as content

    rel = found.rel
    data = catfiles.read_located(found, max_bytes=min(found.size, MAX_FILE_BYTES))
    enc = content.encode(rel, data)
    entry: dict[str, Any] = {
        "path": rel,
        "uri": catfiles.skill_uri(skill, rel),
        "size": len(data),
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "mimeType": enc.mime_type,
        "encoding": enc.encoding,
    }
    entry["text" if enc.text is not None else "blob"] = enc.text if enc.text is not None else enc.blob
    return entry


async def skill_file(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    skill = await _checked_skill(call, args["name"])
    rels: list[str] = list(args["paths"])
    if len(rels) > MAX_PATHS:
        raise SkillMcpError(
            Refusal.TOO_MANY_PATHS,
            f"at most {MAX_PATHS} paths per call; split the batch",
            {"count": len(rels), "limit": MAX_PATHS},
        )
    # What the batch will hold, from the scanned sizes, reserved before anything is opened:
    # a request waiting its turn pins no file (surfaces.answer_bytes).
    scanned = [f.size for rel in rels if (f := skill.file(rel)) is not None]
    await hold_answer_bytes(call.answers, min(sum(scanned), MAX_BATCH_BYTES), call.request)
    # Pass 1: checks and sizes only, nothing read. The batch budget is decided from sizes before
    # any byte is read, so which entries are served never depends on the order of the paths.
    # Each located file stays pinned by a descriptor until its read: closed on every way out.
    found: dict[int, catfiles.Located] = {}
    errors: dict[int, dict[str, Any]] = {}
    try:
        for i, rel in enumerate(rels):
            try:
                found[i] = _locate(skill, rel)
            except SkillMcpError as err:
                errors[i] = _entry_error(rel, err, skill)
        total = sum(f.size for f in found.values())
        if total > MAX_BATCH_BYTES:
            raise SkillMcpError(
                Refusal.BATCH_TOO_LARGE,
                f"the files add up to {total} bytes; the limit per call is {MAX_BATCH_BYTES}; ask for fewer at once",
                {"totalBytes": total, "limit": MAX_BATCH_BYTES, "sizes": {rels[i]: f.size for i, f in found.items()}},
            )
        # Pass 2: the reads, on the event loop when the batch is small, else in a worker thread.
        if total <= INLINE_READ_BYTES:
            return _read_batch(skill, rels, found, errors)
        import anyio

        return await anyio.to_thread.run_sync(_read_batch, skill, rels, found, errors)
    finally:
        for located in found.values():
            located.close()


def _read_batch(
    skill: Skill, rels: list[str], found: dict[int, catfiles.Located], errors: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for i, rel in enumerate(rels):
        if i in errors:
            entries.append(errors[i])
            continue
        try:
            entries.append(_read_entry(skill, found[i]))
        except SkillMcpError as err:
            entries.append(_entry_error(rel, err))
    failed = sum(1 for e in entries if "error" in e)
    return {"name": skill.name, "files": entries, "served": len(entries) - failed, "failed": failed}


def read_tools() -> tuple[ToolSpec, ...]:
    ro = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
    return (
        ToolSpec(
            name="skill_list",
            title="List skills",
            description=(
                "List the skills this server serves: name, description, skill:// URI, file count and "
                "declared scripts with their state. Paginated: pass nextCursor back as cursor. The first "
                "page also lists every problem found while scanning (directories not served and why). "
                "Start here, then load one skill at a time with skill_load."
            ),
            input_schema=schemas.SKILL_LIST_IN,
            output_schema=schemas.SKILL_LIST_OUT,
            handler=skill_list,
            annotations=ro,
            render=skill_list_blocks,
        ),
        ToolSpec(
            name="skill_load",
            title="Load one skill",
            description=(
                "Load one skill by name: its SKILL.md (frontmatter and instructions) as a resource block, and "
                "the manifest of its files with size, sha256 digest and URI. Read the files the instructions "
                "point at with skill_file."
            ),
            input_schema=schemas.SKILL_LOAD_IN,
            output_schema=schemas.SKILL_LOAD_OUT,
            handler=skill_load,
            annotations=ro,
            render=skill_load_blocks,
            structured=skill_load_metadata,
        ),
        ToolSpec(
            name="skill_file",
            title="Read skill files",
            description=(
                f"Read up to {MAX_PATHS} files of one skill in one call, by paths relative to the skill "
                f"directory (as listed by skill_load). Limits: {MAX_FILE_BYTES // 1024} KiB per file and "
                f"{MAX_BATCH_BYTES // MIB} MiB per call, counted from file sizes before reading. "
                "Each file comes back as a resource block (text as text, anything else as base64 with a MIME "
                "type); structuredContent lists path, size and digest of each. A bad path fails only its own "
                "entry."
            ),
            input_schema=schemas.SKILL_FILE_IN,
            output_schema=schemas.SKILL_FILE_OUT,
            handler=skill_file,
            annotations=ro,
            render=skill_file_blocks,
            structured=skill_file_metadata,
        ),
    )
