"""A run's files as MCP: ``resource_link`` items in the ``skill_run`` result, ``resources/read`` after.

The runner keeps the files (``runner.output_store``) and puts ``{uri, path, size, sha256}``
into the result; this module adds what only the protocol needs - a MIME type (from the name's
extension, or sniffed from the first bytes for the common binary types when the extension says
nothing) and the ``resource_link`` content blocks - and answers ``resources/read`` for
``skill-run://`` URIs. Outputs are never listed by ``resources/list`` or the Skills extension:
they are not skill files.

Scope: over HTTP in the handshake era a run's outputs belong to the session that ran it (the
``Mcp-Session-Id`` header); over stdio and in the 2026-07-28 era, which has no sessions, the
unguessable run id is what lets a client read them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.errors import invalid_params

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.runner.output_store import OutputStore

SCHEME = "skill-run://"
SHA256_META = "io.github.skill-mcp/sha256"
# First bytes of the binary formats scripts commonly write, for names without a telling extension.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
)


def output_scope(request: Any) -> str | None:
    """The HTTP session a call came in (None over stdio and where the era has no sessions)."""
    http = getattr(request, "request", None) if request is not None else None
    headers = getattr(http, "headers", None)
    if headers is None:
        return None
    return headers.get("mcp-session-id") or None


def output_mime(path: str, head: bytes) -> str:
    import skill_mcp.surfaces.content as content

    guessed = content.guess_mime(path)
    if guessed is not None:
        return guessed
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    return content.encode(path, head[:4096]).mime_type


def describe(result: dict[str, Any], store: OutputStore) -> dict[str, Any]:
    """Add each output's ``name`` and ``mimeType`` to a run result, and a note for the model."""
    outs = result.get("outputs")
    if not outs:
        return result
    for entry in outs:
        f = store.peek(entry["uri"])
        if f is None:
            continue
        entry["name"] = entry["path"]
        entry["mimeType"] = output_mime(entry["path"], f.data[:64])
    note = (
        f"the script wrote {len(outs)} file(s); each is a resource_link here - read it with resources/read "
        "(kept 15 minutes)"
    )
    result["notes"] = [*result.get("notes", []), note]
    return result


def render_run(result: dict[str, Any]) -> list[Any]:
    """The result as JSON text, then one ``resource_link`` per output file."""
    blocks: list[Any] = [types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))]
    for entry in result.get("outputs", ()):
        link = types.ResourceLink(
            type="resource_link",
            uri=entry["uri"],
            name=entry["name"],
            mime_type=entry["mimeType"],
            size=entry["size"],
            description=f"written by {result.get('skill')} {result.get('script')}",
        )
        link.meta = {SHA256_META: entry["sha256"]}
        blocks.append(link)
    return blocks


def output_size(store: Callable[[], OutputStore | None], uri: str, request: Any) -> int:
    """How many bytes the answer to ``uri`` will carry (0 when it will be refused)."""
    found = store()
    try:
        return 0 if found is None else found.read(uri, output_scope(request)).size
    except SkillMcpError:
        return 0


def read_output(store: Callable[[], OutputStore | None], uri: str, request: Any) -> types.ReadResourceResult:
    """``resources/read`` of a ``skill-run://`` URI; ``-32602`` with the reason otherwise."""
    import skill_mcp.surfaces.content as content

    found = store()
    try:
        if found is None:
            raise SkillMcpError(Refusal.OUTPUT_UNKNOWN, f"no run output {uri} here (no script has run)")
        f = found.read(uri, output_scope(request))
    except SkillMcpError as err:
        raise invalid_params(err) from None
    enc = content.encode(f.path, f.data)
    mime = output_mime(f.path, f.data[:64])
    item: types.TextResourceContents | types.BlobResourceContents
    if enc.text is not None:
        item = types.TextResourceContents(uri=uri, mime_type=mime, text=enc.text)
    else:
        item = types.BlobResourceContents(uri=uri, mime_type=mime, blob=enc.blob or "")
    # A run's outputs are one session's (or one id holder's): never shared from a cache.
    return types.ReadResourceResult(contents=[item], cache_scope="private")
