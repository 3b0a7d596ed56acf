"""Progress of long work (the first catalog build, the first search index, ``validate``, ``pack
lock``) for a person at a terminal: one line on stderr, redrawn in place, cleared at the end.

Stdout is never touched, and nothing is written when stderr is not a terminal (a client's
log, a CI job, a pipe): a progress line there would be noise in a file. The first update is
drawn at once, then at most ``REDRAW_S`` apart, so a fast command costs a few writes; the
last one (``done == total``) clears the line, so work handed to a server (whose end this
module does not see) leaves nothing behind either.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

REDRAW_S = 0.1
CLEAR = "\r\x1b[K"


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """``update(done, total)`` draws ``label: done/total`` on ``stream``; a no-op off a terminal."""

    def __init__(self, label: str, stream: TextIO | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.stream = stream
        self.clock = clock
        self._drawn_at: float | None = None

    @classmethod
    def on_stderr(cls, label: str) -> Progress:
        return cls(label, sys.stderr if is_terminal(sys.stderr) else None)

    def update(self, done: int, total: int) -> None:
        if self.stream is None:
            return
        now = self.clock()
        if done >= total:
            self.close()
            return
        if self._drawn_at is not None and now - self._drawn_at < REDRAW_S:
            return
        self._drawn_at = now
        self.stream.write(f"{CLEAR}{self.label}: {done}/{total}")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self._drawn_at is not None:
            self.stream.write(CLEAR)
            self.stream.flush()
        self._drawn_at = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
