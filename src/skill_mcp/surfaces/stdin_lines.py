"""Stdin read on the event loop, one bounded line at a time (``StdinLines``).

Used instead of the SDK's reader, for two reasons. The SDK reads lines in a worker thread
that no cancellation can interrupt, so a SIGTERM could not stop the server until the client
wrote another line; ``StdinLines`` waits for readability on the event loop and reads only what
is there. And a line is bounded (``MAX_LINE_BYTES``): a client that never sends a newline
cannot grow the server's heap; an over-long line is dropped and replaced by ``TOO_LONG``,
which is not JSON and so is answered like any other unparseable line.
"""

from __future__ import annotations

import logging
import os

import anyio

log = logging.getLogger("skill_mcp.stdio")

MAX_LINE_BYTES = 16 * 1024 * 1024
_CHUNK = 64 * 1024
TOO_LONG = "<a line longer than the limit was dropped>"  # not JSON: answered with -32700


class StdinLines:
    """Async iterator of text lines from ``fd``, cancellable, each bounded by ``max_line``."""

    def __init__(self, fd: int, max_line: int = MAX_LINE_BYTES, *, prefix: bytes = b"") -> None:
        self._fd = fd
        self._max = max_line
        self._buf = bytearray(prefix)  # bytes read from ``fd`` before (``surfaces.early``): served first
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
