"""StdinLines: lines from a pipe, bounded, cancellable."""

from __future__ import annotations

import os

import anyio
import pytest

from skill_mcp.surfaces.stdio.stdin_lines import TOO_LONG, StdinLines

pytestmark = pytest.mark.anyio


async def _read_all(data: bytes, max_line: int = 64) -> list[str]:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, data)
        os.close(write_fd)
        write_fd = -1
        with anyio.fail_after(10):
            return [line async for line in StdinLines(read_fd, max_line=max_line)]
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


async def test_lines_come_out_whole_and_the_last_one_may_lack_a_newline() -> None:
    assert await _read_all(b'{"a":1}\n\n{"b":2}\r\nlast') == ['{"a":1}\n', "\n", '{"b":2}\r\n', "last"]


async def test_an_over_long_line_is_replaced_by_a_marker_and_the_next_line_survives() -> None:
    lines = await _read_all(b"x" * 500 + b"\nok\n" + b"y" * 200)
    assert lines == [TOO_LONG + "\n", "ok\n", TOO_LONG]


async def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert await _read_all(b"\xff\xfe\n") == ["\ufffd\ufffd\n"]


async def test_waiting_for_input_can_be_cancelled() -> None:
    read_fd, write_fd = os.pipe()
    try:
        lines = StdinLines(read_fd)
        with anyio.move_on_after(0.2) as scope:
            await lines.__anext__()
        assert scope.cancelled_caught  # nothing was written: the wait ended by cancellation, not a hang
    finally:
        os.close(read_fd)
        os.close(write_fd)
