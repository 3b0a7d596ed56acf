"""The stdio transport: the SDK's ``stdio_server`` with our own reader, writer and error answers.

``run_stdio`` claims the process's stdin and stdout for the protocol and serves one server
on them. The pieces, one concern each:

- ``stdin_lines.StdinLines`` reads stdin on the event loop, one bounded line at a time;
- ``frame_writer.FrameWriter`` writes each answer as one whole frame from the event loop;
- ``unparseable.answer_unparseable`` answers the lines the SDK drops (``-32700``/``-32600``)
  and holds end of input until every request read so far is answered.

Like the SDK, fd 0 itself is pointed at ``/dev/null`` and fd 1 at stderr while serving (the
wire moves to private descriptors), so nothing else in the process can consume protocol
bytes, and a stray ``print`` or a library's output never reaches the wire.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from mcp.server.stdio import stdio_server

from skill_mcp.surfaces.stdio.frame_writer import FrameWriter
from skill_mcp.surfaces.stdio.stdin_lines import StdinLines
from skill_mcp.surfaces.stdio.unparseable import answer_unparseable

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.surfaces.stdio.early import Handover

log = logging.getLogger("skill_mcp.stdio")


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


class _DropAnswered:
    """The writer, minus the SDK's answers to requests ``surfaces.stdio.early`` answered already."""

    def __init__(self, frames: FrameWriter, answered: dict[int | str, str]) -> None:
        self._frames = frames
        self._answered = dict(answered)

    async def write(self, text: str) -> None:
        if self._answered:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            rid = message.get("id") if isinstance(message, dict) and "method" not in message else None
            if isinstance(rid, int | str) and not isinstance(rid, bool) and rid in self._answered:
                sent = self._answered.pop(rid)
                if json.loads(sent) != message:
                    log.error(
                        "the early handshake answer differed from the SDK server's",
                        extra={"id": rid, "sent": sent[:200], "sdk": text[:200]},
                    )
                return
        await self._frames.write(text)

    async def flush(self) -> None:
        await self._frames.flush()


async def run_stdio(server: Any, early: Handover | None = None) -> None:
    """Serve ``server`` on this process's stdin/stdout until stdin closes or we are cancelled.

    ``early``: what ``surfaces.stdio.early`` read and answered before ``server`` existed; the bytes are
    served first and the server's answers to the requests answered there are dropped.
    """
    with _claim(0, lambda fd: _to_devnull(fd, os.O_RDONLY)) as wire_in, _claim(1, _to_stderr) as wire_out:
        lines = cast(Any, StdinLines(wire_in, prefix=early.prefix if early is not None else b""))
        frames = FrameWriter(wire_out)
        writer: Any = _DropAnswered(frames, early.answered) if early is not None and early.answered else frames
        log.debug("stdout writer ready", extra={"mode": frames.mode})
        try:
            async with (
                stdio_server(stdin=lines, stdout=writer) as (read, write),
                answer_unparseable(read, write) as (inbound, outbound),
            ):
                await server.run(inbound, outbound, server.create_initialization_options())
        finally:
            frames.close()
