"""Stdout written from the event loop, one whole frame at a time (``FrameWriter``).

Used instead of the SDK's writer, which hands every message to a worker thread twice (once
to write, once to flush), a cost larger than most handlers' own (figures in bench/README.md).
``FrameWriter`` writes a whole frame with one ``write`` on the event loop through a private
non-blocking descriptor, and waits for writability when the client is slow to read, so a
client that stops reading stalls only the writer, never the loop.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import stat
from typing import cast

import anyio

log = logging.getLogger("skill_mcp.stdio")

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
        self.mode = (
            "socket"
            if self._sock is not None
            else "nonblocking"
            if self._fd is not None
            else "pipe-chunks"
            if self._poll is not None
            else "thread"
        )

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
                    log.warning(
                        "a frame was left unfinished at shutdown: the client stopped reading",
                        extra={"unwritten": len(self._pending)},
                    )
            raise

    async def _pump(self) -> None:
        """Write ``_pending`` out, waiting for room whenever the wire is full."""
        while self._pending:
            n = self._try(self._pending)
            if n is None:
                await anyio.wait_writable(
                    self._sock if self._sock is not None else self._fd if self._fd is not None else self._wire
                )
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
            data = data[os.write(fd, data) :]
        except BlockingIOError:  # someone made the wire non-blocking; wait for room
            if room is None:
                room = select.poll()
                room.register(fd, select.POLLOUT)
            room.poll()
