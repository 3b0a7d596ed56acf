"""The search index's whole build in a process of its own (``python -m skill_mcp.search.worker``).

``search.offload`` starts it for the body phase of a two-phase build, so that tokenising every
SKILL.md body never takes the server's GIL. It reads one framed message from stdin (an 8-byte
length, then the pickled build order ``search.offload`` made: where to write, and per skill in
doc id order its fields, key fields and record), builds the index exactly as the server's own
build does (``source.build_keyed``), and writes it with ``store.save`` (a private temporary
file renamed into place: an abandoned build leaves no file to open). The server never trusts
it: it opens the result as it opens what an earlier start persisted, key and checksums checked.

It runs at a lower CPU priority, its fd 1 is fd 2 (nothing it prints can reach the protocol),
and it dies with the server: ``PR_SET_PDEATHSIG`` where the kernel has it, and in any case a
thread that ends the process when stdin reaches end of file (the server holds the other end).

Exit status: 0 written, 3 not writable (a body unreadable or too recent to persist), 2 a bad
build order; anything else is a failure. The server then builds in its own thread.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from pathlib import Path
from typing import Any

NICE = 10
WRITTEN, NOT_WRITABLE, BAD_ORDER = 0, 3, 2
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Be killed when the thread that started us ends (Linux), and not outlive a parent gone
    before that was set."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(BAD_ORDER)


def _read_exactly(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the build order ended early")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _watch(fd: int) -> None:
    """End the process once the server's end of stdin is closed (the server is gone)."""
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass
    os._exit(BAD_ORDER)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    os.dup2(2, 1)  # whatever anything prints goes to stderr, never to the protocol
    _die_with(int(argv[0]) if argv else os.getppid())
    with contextlib.suppress(OSError):
        os.nice(NICE)
    stdin = 0  # raw reads: the watcher thread below must hold no lock of a buffered stdin
    try:
        size = int.from_bytes(_read_exactly(stdin, 8), "big")
        # Written by the server that started us, into a pipe only it holds: not untrusted data.
        order: dict[str, Any] = pickle.loads(_read_exactly(stdin, size))  # noqa: S301
    except (EOFError, pickle.UnpicklingError, ValueError):
        return BAD_ORDER
    threading.Thread(target=_watch, args=(stdin,), daemon=True).start()

    from skill_mcp.catalog.cachefile import marker_time
    from skill_mcp.search.offload import record
    from skill_mcp.search.source import build_keyed
    from skill_mcp.search.store import save

    path = Path(order["path"])
    t0 = marker_time(path.parent)
    index, key, writable = build_keyed(((f, k, record(s)) for f, k, s in order["items"]), t0)
    if not (writable or (order["private"] and t0 is not None)):
        return NOT_WRITABLE
    save(path, key, index)
    return WRITTEN if os.path.exists(path) else NOT_WRITABLE


if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    os._exit(status)  # not a normal shutdown: the watcher thread is still reading stdin
