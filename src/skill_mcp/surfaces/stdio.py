"""The stdio transport, with one addition: a line that is not JSON-RPC gets an answer.

The SDK's ``stdio_server`` turns a line it cannot parse into an ``Exception`` on the read
stream, and its dispatcher drops such items. JSON-RPC 2.0 wants a reply: ``-32700`` with
``id: null`` for a line that is not JSON at all, ``-32600`` for JSON that is not a JSON-RPC
message (with the request's ``id`` when one can be read). ``answer_unparseable`` sits between
the transport and the server loop, answers those items on a clone of the write stream (so the
reply is serialized by the transport's single writer and never tears a frame) and forwards
everything else untouched. The SDK's claim on fd 0/1 stays in force: stray writes to fd 1 go to
stderr while serving, so nothing but protocol reaches stdout.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("skill_mcp.stdio")


def _request_id(errors: list[Any]) -> int | str | None:
    for err in errors:
        value = err.get("input")
        if isinstance(value, dict):
            rid = value.get("id")
            if isinstance(rid, (int, str)) and not isinstance(rid, bool):
                return rid
            return None
    return None


def reply_for(item: Exception) -> types.JSONRPCError | None:
    """The error reply a transport-level parse failure deserves; None for a blank line."""
    if not isinstance(item, ValidationError):
        return None
    errors = item.errors()
    if errors and errors[0].get("type") == "json_invalid":
        raw = errors[0].get("input")
        if isinstance(raw, str) and not raw.strip():
            return None  # an empty line between messages is not a message
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=types.PARSE_ERROR, message="Parse error: the line is not valid JSON"))
    return types.JSONRPCError(jsonrpc="2.0", id=_request_id(errors), error=types.ErrorData(
        code=types.INVALID_REQUEST, message="Invalid Request: the line is JSON but not a JSON-RPC 2.0 message"))


@asynccontextmanager
async def answer_unparseable(read: Any, write: Any) -> AsyncIterator[tuple[Any, Any]]:
    forward, forwarded = create_context_streams[SessionMessage | Exception](0)
    replies = write.clone()

    async def relay() -> None:
        async with forward, replies:
            async for item in read:
                if not isinstance(item, Exception):
                    await forward.send(item)
                    continue
                reply = reply_for(item)
                log.warning("unparseable input line", extra={"answered": reply is not None,
                                                             "code": reply.error.code if reply else None})
                if reply is not None:
                    await replies.send(SessionMessage(reply))

    async with anyio.create_task_group() as tg:
        tg.start_soon(relay)
        try:
            yield forwarded, write
        finally:
            tg.cancel_scope.cancel()


async def run_stdio(server: Any) -> None:
    """Serve ``server`` on this process's stdin/stdout until stdin closes."""
    async with stdio_server() as (read, write), answer_unparseable(read, write) as (inbound, outbound):
        await server.run(inbound, outbound, server.create_initialization_options())
