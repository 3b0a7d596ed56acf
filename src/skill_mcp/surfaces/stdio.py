"""The stdio transport, with one addition: a line that is not JSON-RPC gets an answer.

The SDK's ``stdio_server`` turns a line it cannot parse into an ``Exception`` on the read
stream, and its dispatcher drops such items. JSON-RPC 2.0 wants a reply: ``-32700`` with
``id: null`` for a line that is not JSON at all, ``-32600`` for JSON that is not a JSON-RPC
message (with the request's ``id`` when one can be read). ``answer_unparseable`` sits between
the transport and the server loop, answers those items on a clone of the write stream (so the
reply is serialized by the transport's single writer and never tears a frame) and forwards
everything else untouched. The SDK's claim on fd 1 stays in force: stray writes to fd 1 go to
stderr while serving, so nothing but protocol reaches stdout.

Stdin is read by ``StdinLines`` instead of the SDK's reader, for two reasons. The SDK reads
lines in a worker thread that no cancellation can interrupt, so a SIGTERM could not stop the
server until the client wrote another line; ``StdinLines`` waits for readability on the event
loop and reads only what is there. And a line is bounded (``MAX_LINE_BYTES``): a client that
never sends a newline cannot grow the server's heap; an over-long line is dropped and answered
like any other unparseable line. Like the SDK, fd 0 itself is pointed at ``/dev/null`` while
serving, so nothing else in the process can consume protocol bytes.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast

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
                    log.warning("unparseable input line", extra={"answered": reply is not None,
                                                                 "code": reply.error.code if reply else None})
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


MAX_LINE_BYTES = 16 * 1024 * 1024
_CHUNK = 64 * 1024
TOO_LONG = "<a line longer than the limit was dropped>"  # not JSON: answered with -32700


class StdinLines:
    """Async iterator of text lines from ``fd``, cancellable, each bounded by ``max_line``."""

    def __init__(self, fd: int, max_line: int = MAX_LINE_BYTES) -> None:
        self._fd = fd
        self._max = max_line
        self._buf = bytearray()
        self._eof = False
        self._dropping = False  # inside an over-long line: discard up to its newline
        self._pollable = True
        self._scanned = 0  # bytes of _buf already known to hold no newline

    def __aiter__(self) -> StdinLines:
        return self

    async def _fill(self) -> None:
        if self._pollable:
            try:
                await anyio.wait_readable(self._fd)
            except OSError:
                # A regular file cannot be polled; reading it never waits for a peer anyway.
                self._pollable = False
        try:
            if self._pollable:
                chunk = os.read(self._fd, _CHUNK)  # readable: returns at once, with data or at EOF
            else:
                chunk = await anyio.to_thread.run_sync(os.read, self._fd, _CHUNK)
        except OSError as exc:
            # A terminal that hung up reads EIO: the client is gone, which is end of input.
            log.info("stdin read failed; treating it as end of input", extra={"error": exc.strerror})
            chunk = b""
        if not chunk:
            self._eof = True
        self._buf += chunk

    async def __anext__(self) -> str:
        while True:
            newline = self._buf.find(b"\n", self._scanned)
            self._scanned = len(self._buf) if newline < 0 else 0
            if newline >= 0:
                too_long = self._dropping or newline + 1 > self._max
                line = b"" if too_long else bytes(self._buf[: newline + 1])
                del self._buf[: newline + 1]
                if too_long:
                    if not self._dropping:
                        log.warning("input line over the limit; dropping it", extra={"limit": self._max})
                    self._dropping = False
                    return TOO_LONG + "\n"
                return line.decode("utf-8", errors="replace")
            if len(self._buf) > self._max:
                if not self._dropping:
                    log.warning("input line over the limit; dropping it", extra={"limit": self._max})
                self._dropping = True
                self._buf.clear()
                self._scanned = 0
            if self._eof:
                if self._dropping:
                    self._dropping = False
                    return TOO_LONG
                if self._buf:
                    line = bytes(self._buf)
                    self._buf.clear()
                    self._scanned = 0
                    return line.decode("utf-8", errors="replace")
                raise StopAsyncIteration
            await self._fill()


@contextmanager
def _claim_stdin() -> Iterator[int]:
    """Move the wire to a private descriptor and point fd 0 at /dev/null while serving."""
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield wire
    finally:
        os.dup2(wire, 0)
        os.close(wire)


async def run_stdio(server: Any) -> None:
    """Serve ``server`` on this process's stdin/stdout until stdin closes or we are cancelled."""
    with _claim_stdin() as wire:
        lines = cast(Any, StdinLines(wire))
        async with stdio_server(stdin=lines) as (read, write), answer_unparseable(read, write) as (inbound, outbound):
            await server.run(inbound, outbound, server.create_initialization_options())
