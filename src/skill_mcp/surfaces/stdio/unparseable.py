"""Answers for the stdio lines the SDK drops, and the drain at end of input.

The SDK's ``stdio_server`` turns a line it cannot parse into an ``Exception`` on the read
stream, and its dispatcher drops such items. JSON-RPC 2.0 wants a reply: ``-32700`` with
``id: null`` for a line that is not JSON at all, ``-32600`` for JSON that is not a JSON-RPC
message (with the request's ``id`` when one can be read). ``answer_unparseable`` sits between
the transport and the server loop, answers those items on a clone of the write stream (so the
reply is serialized by the transport's single writer and never tears a frame) and forwards
everything else untouched. It also holds end of input back until the requests read so far
are answered (``InFlight``), so piped input gets every answer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
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
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=types.ErrorData(code=types.PARSE_ERROR, message="Parse error: the line is not valid JSON"),
        )
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=_request_id(errors),
        error=types.ErrorData(
            code=types.INVALID_REQUEST, message="Invalid Request: the line is JSON but not a JSON-RPC 2.0 message"
        ),
    )


DRAIN_SECONDS = 10.0


class InFlight:
    """Ids of requests read from stdin and not yet answered on stdout."""

    def __init__(self) -> None:
        self._ids: set[int | str] = set()
        self._idle = anyio.Event()
        self._idle.set()

    def add(self, rid: int | str) -> None:
        self._ids.add(rid)
        if self._idle.is_set():
            self._idle = anyio.Event()

    def done(self, rid: Any) -> None:
        self._ids.discard(rid)
        if not self._ids:
            self._idle.set()

    def __len__(self) -> int:
        return len(self._ids)

    async def wait_idle(self) -> None:
        await self._idle.wait()


def _note_inbound(message: Any, inflight: InFlight) -> None:
    if isinstance(message, types.JSONRPCRequest):
        inflight.add(message.id)
    elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
        # A cancelled request gets no answer; do not wait for one.
        inflight.done((message.params or {}).get("requestId"))


@asynccontextmanager
async def answer_unparseable(read: Any, write: Any) -> AsyncIterator[tuple[Any, Any]]:
    """Sit between the transport and the server loop: answer what cannot be parsed, and drain.

    At end of input the server loop would cancel every request still running, so the answers
    to the last lines of ``skill-mcp serve < requests.jsonl`` would be lost. End of input is
    therefore passed on only once every request read so far has been answered (or cancelled
    by the client), for at most ``DRAIN_SECONDS``.
    """
    forward, forwarded = create_context_streams[SessionMessage | Exception](0)
    outgoing, to_send = create_context_streams[SessionMessage](0)
    replies = outgoing.clone()
    inflight = InFlight()

    async def inbound() -> None:
        async with forward, replies:
            async for item in read:
                if isinstance(item, Exception):
                    reply = reply_for(item)
                    log.warning(
                        "unparseable input line",
                        extra={"answered": reply is not None, "code": reply.error.code if reply else None},
                    )
                    if reply is not None:
                        await replies.send(SessionMessage(reply))
                    continue
                _note_inbound(item.message, inflight)
                await forward.send(item)
            with anyio.move_on_after(DRAIN_SECONDS) as scope:
                await inflight.wait_idle()
            if scope.cancelled_caught:
                log.warning("end of input: requests still unanswered after the drain", extra={"left": len(inflight)})

    async def outbound() -> None:
        async with write, to_send:
            async for item in to_send:
                if isinstance(item.message, (types.JSONRPCResponse, types.JSONRPCError)):
                    inflight.done(item.message.id)
                await write.send(item)

    # The writer outlives the reader: once the server loop is done, whatever it already handed
    # over still reaches stdout. The writer ends when the loop and the reader closed their ends.
    async with anyio.create_task_group() as writer:
        writer.start_soon(outbound)
        async with anyio.create_task_group() as reader:
            reader.start_soon(inbound)
            try:
                yield forwarded, outgoing
            finally:
                reader.cancel_scope.cancel()
