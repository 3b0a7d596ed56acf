"""``cli.progress``: drawn at once, redrawn at most every ``REDRAW_S``, cleared at the end, and
nothing at all without a terminal (the pty tests in test_first_day.py drive it for real)."""

from __future__ import annotations

import io

from skill_mcp.cli.progress import CLEAR, REDRAW_S, Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_first_update_is_drawn_then_throttled_then_cleared_at_the_end() -> None:
    out, clock = io.StringIO(), Clock()
    progress = Progress("reading skills", out, clock)
    progress.update(0, 10)
    progress.update(1, 10)  # same instant: not redrawn
    clock.now += REDRAW_S
    progress.update(2, 10)
    progress.update(10, 10)  # the end clears the line
    assert out.getvalue() == f"{CLEAR}reading skills: 0/10{CLEAR}reading skills: 2/10{CLEAR}"


def test_without_a_terminal_nothing_is_written() -> None:
    progress = Progress("reading skills", None)
    progress.update(0, 1)
    progress.close()  # no stream: nothing to write to, nothing raised


def test_work_that_never_drew_clears_nothing() -> None:
    out = io.StringIO()
    with Progress("x", out):
        pass
    assert out.getvalue() == ""
