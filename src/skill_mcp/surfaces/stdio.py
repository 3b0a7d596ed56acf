"""The stdio transport, with one addition: a line that is not JSON-RPC gets an answer.

The SDK's ``stdio_server`` turns a line it cannot parse into an ``Exception`` on the read
stream, and its dispatcher drops such items. JSON-RPC 2.0 wants a reply: ``-32700`` with
``id: null`` for a line that is not JSON at all, ``-32600`` for JSON that is not a JSON-RPC
message (with the request's ``id`` when one can be read). ``answer_unparseable`` sits between
the transport and the server loop, answers those items on a clone of the write stream (so the
reply is serialized by the transport's single writer and never tears a frame) and forwards
everything else untouched.

Stdin is read by ``StdinLines`` instead of the SDK's reader, for two reasons. The SDK reads
lines in a worker thread that no cancellation can interrupt, so a SIGTERM could not stop the
server until the client wrote another line; ``StdinLines`` waits for readability on the event
loop and reads only what is there. And a line is bounded (``MAX_LINE_BYTES``): a client that
never sends a newline cannot grow the server's heap; an over-long line is dropped and answered
like any other unparseable line. Like the SDK, fd 0 itself is pointed at ``/dev/null`` while
serving, so nothing else in the process can consume protocol bytes.

Stdout is written by ``FrameWriter`` instead of the SDK's writer, which hands every message
to a worker thread twice (once to write, once to flush): about 0.2 ms of every answer on this
machine, which is more than most handlers take. ``FrameWriter`` writes a whole frame with one
``write`` on the event loop through a private non-blocking descriptor, and waits for
writability when the client is slow to read, so a client that stops reading stalls only the
writer, never the loop. As the SDK does, fd 1 itself is pointed at stderr while serving, so a
stray ``print`` or a library's output never reaches the wire.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import select
import socket
import stat
from collections.abc import AsyncIterator, Callable, Iterator
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


def _to_devnull(fd: int, flags: int) -> None:
    null = os.open(os.devnull, flags)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def _to_stderr(fd: int) -> None:
    try:
        os.dup2(2, fd)
    except OSError as err:
        if err.errno != errno.EBADF:
            raise
        _to_devnull(fd, os.O_WRONLY)  # no stderr: stray output goes nowhere, never to the wire


@contextmanager
def _claim(fd: int, divert: Callable[[int], None]) -> Iterator[int]:
    """Move the wire on ``fd`` to a private descriptor and ``divert`` ``fd`` while serving.

    stdin is pointed at /dev/null and stdout at stderr, so nothing else in the process can
    read protocol bytes or write into the protocol; both are put back on exit.
    """
    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        divert(fd)
    except BaseException:
        os.close(wire)
        raise
    try:
        yield wire
    finally:
        os.dup2(wire, fd)
        os.close(wire)


PIPE_CHUNK = select.PIPE_BUF  # a write this small fits in the free slot that makes a pipe writable
FINISH_FRAME_S = 5.0  # at shutdown, how long a frame already begun may take to finish


class FrameWriter:
    """Writes whole frames to the wire from the event loop; what ``stdio_server`` takes as stdout.

    How depends on what the wire is, and never changes the wire's own open file description
    (which the client, a shell or a terminal may share):

    - ``nonblocking``: a pipe or a terminal opened again through ``/proc/self/fd``, which gives
      this process a description of its own, made non-blocking; a frame is one ``write``;
    - ``pipe-chunks``: a pipe that cannot be opened again (it belongs to another user, as
      docker's pipes do once the appliance has dropped to its server uid): chunks of at most
      ``PIPE_BUF`` bytes, each written only once ``poll`` says the pipe is writable, which for a
      pipe means a free page, so the blocking ``write`` cannot block;
    - ``socket``: written with ``MSG_DONTWAIT``, a per-call flag;
    - ``thread``: anything else (a regular file, a terminal without ``/proc``) is written by a
      worker thread, one hop per frame.

    A frame is written completely before the next one starts (``stdio_server`` awaits each
    ``write``); a frame that does not fit waits for the client to read. The writer is only
    cancelled at shutdown: a frame not yet begun is then dropped, and one already begun is
    finished first (for at most ``FINISH_FRAME_S``, in case the client stopped reading).
    """

    def __init__(self, wire: int, *, reopen: bool = True) -> None:
        """``reopen=False`` skips the ``/proc`` reopen, as an unreadable pipe would (for tests)."""
        self._wire = wire
        self._fd: int | None = None  # a private non-blocking description of a pipe or a tty
        self._sock: socket.socket | None = None
        self._poll: select.poll | None = None
        self._pending = memoryview(b"")  # what is left of the frame being written
        st_mode = os.fstat(wire).st_mode
        if stat.S_ISSOCK(st_mode):
            self._sock = socket.socket(fileno=os.dup(wire))
        elif stat.S_ISFIFO(st_mode) or stat.S_ISCHR(st_mode):
            self._fd = _reopen_nonblocking(wire) if reopen else None
            if self._fd is None and stat.S_ISFIFO(st_mode):
                self._poll = select.poll()
                self._poll.register(wire, select.POLLOUT)
        self.mode = ("socket" if self._sock is not None else "nonblocking" if self._fd is not None
                     else "pipe-chunks" if self._poll is not None else "thread")

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        if self.mode == "thread":
            await anyio.to_thread.run_sync(_write_all, self._wire, data)  # a thread always finishes
            return
        self._pending = data
        try:
            await self._pump()
        except anyio.get_cancelled_exc_class():
            # Cancelled (shutdown) with part of the frame on the wire: finish it, within a bound,
            # so a client still reading never sees a torn frame. A frame not yet begun is dropped.
            if 0 < len(self._pending) < len(data):
                with anyio.CancelScope(shield=True), anyio.move_on_after(FINISH_FRAME_S) as bound:
                    await self._pump()
                if bound.cancelled_caught:
                    log.warning("a frame was left unfinished at shutdown: the client stopped reading",
                                extra={"unwritten": len(self._pending)})
            raise

    async def _pump(self) -> None:
        """Write ``_pending`` out, waiting for room whenever the wire is full."""
        while self._pending:
            n = self._try(self._pending)
            if n is None:
                await anyio.wait_writable(self._sock if self._sock is not None else
                                          self._fd if self._fd is not None else self._wire)
            else:
                self._pending = self._pending[n:]

    def _try(self, data: memoryview) -> int | None:
        """One write that cannot block: bytes written, or None when there is no room now."""
        try:
            if self._sock is not None:
                return self._sock.send(data, socket.MSG_DONTWAIT)
            if self._fd is not None:
                return os.write(self._fd, data)
            ready = cast(select.poll, self._poll).poll(0)
            if not ready:
                return None
            if ready[0][1] & (select.POLLERR | select.POLLHUP | select.POLLNVAL) and not ready[0][1] & select.POLLOUT:
                raise BrokenPipeError(errno.EPIPE, "the client closed its end of stdout")
            return os.write(self._wire, data[:PIPE_CHUNK])
        except (BlockingIOError, InterruptedError):
            return None

    async def flush(self) -> None:
        """Nothing is buffered: each ``write`` hands its whole frame to the kernel."""

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._poll = None


def _reopen_nonblocking(wire: int) -> int | None:
    """A new non-blocking description of the pipe or terminal behind ``wire``, or None."""
    try:
        fd = os.open(f"/proc/self/fd/{wire}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    before, after = os.fstat(wire), os.fstat(fd)
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino):  # pragma: no cover - defensive
        os.close(fd)
        return None
    return fd


def _write_all(fd: int, data: memoryview) -> None:
    """All of ``data`` to ``fd``, in a worker thread (the ``thread`` mode)."""
    room: select.poll | None = None
    while data:
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:  # someone made the wire non-blocking; wait for room
            if room is None:
                room = select.poll()
                room.register(fd, select.POLLOUT)
            room.poll()


async def run_stdio(server: Any) -> None:
    """Serve ``server`` on this process's stdin/stdout until stdin closes or we are cancelled."""
    with _claim(0, lambda fd: _to_devnull(fd, os.O_RDONLY)) as wire_in, _claim(1, _to_stderr) as wire_out:
        lines = cast(Any, StdinLines(wire_in))
        frames = FrameWriter(wire_out)
        log.debug("stdout writer ready", extra={"mode": frames.mode})
        try:
            async with (stdio_server(stdin=lines, stdout=cast(Any, frames)) as (read, write),
                        answer_unparseable(read, write) as (inbound, outbound)):
                await server.run(inbound, outbound, server.create_initialization_options())
        finally:
            frames.close()
