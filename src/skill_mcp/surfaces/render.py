"""The ``content`` blocks of each read tool's result, and what stays out of ``structuredContent``.

Each answer carries a file's text once. ``content`` is what every client hands the model
(langchain-mcp-adapters, openai-agents and hosts show it; pydantic-ai shows it whenever it holds
anything but text blocks), so file bodies travel there, each as an embedded resource (its URI,
MIME type and text or base64), images as image blocks the model can see. ``structuredContent``
is the metadata a program reads (paths, sizes, digests, the manifest, scripts, refusals): the
bodies are taken out of it (``skill_file_metadata``, ``skill_load_metadata``). Carried in both,
an 11.8 KB file cost a model about 37 KB of context.
"""

from __future__ import annotations

import json
from typing import Any

# The SDK's content models are imported by the functions that build blocks: the texts
# (``skill_list_text``) are also what ``surfaces.stdio.early`` answers with before the SDK is
# imported, so this module must import without it.

_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# What a handler's result carries for ``content`` only; never in ``structuredContent``.
BODY_KEYS = ("text", "blob")
SKILL_MD_TEXT = "skillMd"


def _file_block(entry: dict[str, Any]) -> Any:
    import mcp_types as types

    if entry["encoding"] == "utf-8":
        return types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri=entry["uri"], mime_type=entry["mimeType"], text=entry["text"]),
        )
    if entry["mimeType"] in _IMAGES:
        return types.ImageContent(type="image", data=entry["blob"], mime_type=entry["mimeType"])
    return types.EmbeddedResource(
        type="resource",
        resource=types.BlobResourceContents(uri=entry["uri"], mime_type=entry["mimeType"], blob=entry["blob"]),
    )


def skill_file_blocks(out: dict[str, Any]) -> list[Any]:
    """One line per requested path (served, with its size and digest, or refused and why), then
    each served file as its own block, in the order asked."""
    import mcp_types as types

    lines = [
        f"{out['name']}: {out['served']} file(s) served, {out['failed']} refused; each served file follows "
        "as a resource block."
    ]
    files: list[Any] = []
    for entry in out["files"]:
        if "error" in entry:
            err = entry["error"]
            lines.append(f"- {entry['path']}: refused ({err['reason']}): {err['detail']}")
        else:
            lines.append(f"- {entry['path']} ({entry['mimeType']}, {entry['size']} bytes, {entry['digest']})")
            files.append(_file_block(entry))
    return [types.TextContent(type="text", text="\n".join(lines)), *files]


def skill_file_metadata(out: dict[str, Any]) -> dict[str, Any]:
    """``structuredContent`` of ``skill_file``: every entry without its body."""
    return {**out, "files": [{k: v for k, v in e.items() if k not in BODY_KEYS} for e in out["files"]]}


def skill_load_blocks(out: dict[str, Any]) -> list[Any]:
    """SKILL.md verbatim (frontmatter and instructions) as a resource, then the files and scripts
    one a line. Digests stay in ``structuredContent``: the model reads paths, a host verifies."""
    import mcp_types as types

    lines = [
        f"# Skill {out['name']} ({out['uri']}): its SKILL.md is the resource above; the body is the instructions.",
        "",
        f"## Files ({len(out['files'])}; read them with skill_file)",
    ]
    lines += [f"- {f['path']} ({f.get('mimeType', '?')}, {f['size']} bytes)" for f in out["files"]]
    if out["scripts"]:
        lines += ["", "## Declared scripts (run them with skill_run)"]
        lines += [
            f"- {s['script']}: {s['state']}" + (f" ({s['reason']})" if s.get("reason") else "") for s in out["scripts"]
        ]
    skill_md = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri=out["uri"], mime_type="text/markdown", text=out[SKILL_MD_TEXT]),
    )
    return [skill_md, types.TextContent(type="text", text="\n".join(lines))]


def skill_load_metadata(out: dict[str, Any]) -> dict[str, Any]:
    """``structuredContent`` of ``skill_load``: everything but the SKILL.md text."""
    return {k: v for k, v in out.items() if k != SKILL_MD_TEXT}


def _script_note(s: dict[str, Any]) -> str:
    return f"{s['script']} ({s.get('interpreter', '?')}, {s['state']})"


def skill_list_line(entry: dict[str, Any]) -> str:
    """One skill of a ``skill_list`` page, as the model reads it."""
    notes = [f"{entry['fileCount']} file{'' if entry['fileCount'] == 1 else 's'}"]
    if entry["scripts"]:
        notes.append("scripts: " + ", ".join(_script_note(s) for s in entry["scripts"]))
    if "skillsListExcluded" in entry:
        notes.append(f"not in skills/list: {entry['skillsListExcluded']}")
    return f"- {entry['name']}: {entry['description']} [{'; '.join(notes)}]"


def skill_list_blocks(out: dict[str, Any]) -> list[Any]:
    """``skill_list_text`` as the result's one text block."""
    import mcp_types as types

    return [types.TextContent(type="text", text=skill_list_text(out))]


def _by_reason(out: dict[str, Any]) -> str:
    """How many problems there are of each reason, most first: ``problemsByReason``, which a first
    page carries when it lists only some of them."""
    counts: dict[str, int] = out.get("problemsByReason") or {}
    return ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def skill_list_text(out: dict[str, Any]) -> str:
    """One line per skill (name, description, files, scripts), then grants and problems.

    What the model reads: the same facts as ``structuredContent`` without JSON's keys and
    quotes on every entry, so a page costs far fewer tokens.
    """
    skills = out["skills"]
    head = f"{len(skills)} of {out['total']} skill(s); load one with skill_load(name)."
    if "nextCursor" in out:
        head += f" More: call skill_list with cursor {json.dumps(out['nextCursor'])}."
    lines = [head]
    lines += [skill_list_line(entry) for entry in skills]
    grant = f"Script grants from: {out['grantFrom']}"
    lines.append(grant + (f" ({out['grantNote']})" if out.get("grantNote") else "") + ".")
    if "problems" in out:
        listed, count = out["problems"], out["problemCount"]
        if not listed:
            lines.append("Problems: none.")
        elif len(listed) < count:
            lines.append(
                f"Problems ({count}; the first {len(listed)} listed, errors first; "
                f"`skill-mcp validate` lists them all): {_by_reason(out)}."
            )
        else:
            lines.append(f"Problems ({count}):")
        lines += [f"- {p['path']}: {p['reason']} ({p.get('level', 'error')}): {p['detail']}" for p in out["problems"]]
    elif out["problemCount"]:
        lines.append(f"Problems: {out['problemCount']} (listed on the first page).")
    return "\n".join(lines)
