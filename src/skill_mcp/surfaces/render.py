"""Readable ``content`` blocks for results that carry file bodies.

``structuredContent`` is the contract; the ``content`` blocks are what a client that ignores
it shows the model. For ``skill_file`` the JSON rendering would repeat every file body escaped
(and base64 twice), doubling a response that may already be 4 MiB, so the text block carries
the text files verbatim under a header each, images become image blocks the model can see, and
other binaries become embedded blob resources.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _header(entry: dict[str, Any]) -> str:
    return f"--- {entry['path']} ({entry['mimeType']}, {entry['size']} bytes, {entry['digest']}) ---"


def skill_file_blocks(out: dict[str, Any]) -> list[Any]:
    parts = [f"{out['name']}: {out['served']} file(s) served, {out['failed']} refused"]
    attachments: list[Any] = []
    for entry in out["files"]:
        if "error" in entry:
            err = entry["error"]
            parts.append(f"--- {entry['path']}: refused ({err['reason']}): {err['detail']} ---")
        elif entry["encoding"] == "utf-8":
            parts.append(_header(entry) + "\n" + entry["text"])
        else:
            parts.append(_header(entry) + "\n(binary; attached below)")
            if entry["mimeType"] in _IMAGES:
                attachments.append(types.ImageContent(type="image", data=entry["blob"], mime_type=entry["mimeType"]))
            else:
                attachments.append(types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
                    uri=entry["uri"], mime_type=entry["mimeType"], blob=entry["blob"])))
    return [types.TextContent(type="text", text="\n".join(parts)), *attachments]


def skill_load_blocks(out: dict[str, Any]) -> list[Any]:
    """The instructions verbatim, then the manifest and scripts one a line (no JSON-escaped copy)."""
    lines = [f"# Skill {out['name']} ({out['uri']})", "", out["instructions"].rstrip("\n"), "",
             f"## Files ({len(out['files'])}; read them with skill_file)"]
    lines += [f"- {f['path']} ({f.get('mimeType', '?')}, {f['size']} bytes, {f['digest']})" for f in out["files"]]
    if out["scripts"]:
        lines += ["", "## Declared scripts"]
        lines += [f"- {s['script']}: {s['state']}" + (f" ({s['reason']})" if s.get("reason") else "")
                  for s in out["scripts"]]
    lines += ["", "## Frontmatter", json.dumps(out["frontmatter"], ensure_ascii=False)]
    return [types.TextContent(type="text", text="\n".join(lines))]


def _script_note(s: dict[str, Any]) -> str:
    return f"{s['script']} ({s.get('interpreter', '?')}, {s['state']})"


def skill_list_blocks(out: dict[str, Any]) -> list[Any]:
    """One line per skill (name, description, files, scripts), then grants and problems.

    What the model reads: the same facts as ``structuredContent`` without JSON's keys and
    quotes on every entry, so a page costs far fewer tokens.
    """
    skills = out["skills"]
    head = f"{len(skills)} of {out['total']} skill(s); load one with skill_load(name)."
    if "nextCursor" in out:
        head += f" More: call skill_list with cursor {json.dumps(out['nextCursor'])}."
    lines = [head]
    for entry in skills:
        notes = [f"{entry['fileCount']} file{'' if entry['fileCount'] == 1 else 's'}"]
        if entry["scripts"]:
            notes.append("scripts: " + ", ".join(_script_note(s) for s in entry["scripts"]))
        if "skillsListExcluded" in entry:
            notes.append(f"not in skills/list: {entry['skillsListExcluded']}")
        lines.append(f"- {entry['name']}: {entry['description']} [{'; '.join(notes)}]")
    grant = f"Script grants from: {out['grantFrom']}"
    lines.append(grant + (f" ({out['grantNote']})" if out.get("grantNote") else "") + ".")
    if "problems" in out:
        lines.append(f"Problems ({out['problemCount']}):" if out["problems"] else "Problems: none.")
        lines += [f"- {p['path']}: {p['reason']} ({p.get('level', 'error')}): {p['detail']}" for p in out["problems"]]
    elif out["problemCount"]:
        lines.append(f"Problems: {out['problemCount']} (listed on the first page).")
    return [types.TextContent(type="text", text="\n".join(lines))]
