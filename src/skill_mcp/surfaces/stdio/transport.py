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
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from mcp.server.stdio import stdio_server

from skill_mcp.surfaces.stdio.frame_writer import FrameWriter
from skill_mcp.surfaces.stdio.stdin_lines import StdinLines
from skill_mcp.surfaces.stdio.unparseable import answer_unparseable

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
