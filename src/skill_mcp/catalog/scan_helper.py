"""A scan helper: a process forked while the server is still single-threaded, to share a cold scan.

A cold scan reads every skill, a few hundred microseconds of CPU each (``catalog.skill``). The
server's first catalog build runs after the SDK's loader thread has started, so a worker forked
then could copy a lock another thread holds, and a spawned one (a fresh interpreter) costs tens
of milliseconds before it loads anything. So ``server.serve_stdio_early`` calls ``start`` right
after the boot hardening and before any thread exists (about a millisecond): the helper is a
fork of the process as it is then (hardened, non-dumpable), and it waits on a pipe. When the
cache directory holds no catalog yet (``likely_cold``) it first imports the scanner (about 40
ms of CPU), on the other core while the handshake is answered; otherwise (a warm start,
``verify``) it checks the cache file's directory stamps for the first build to skip
(``catalog.verdicts``, on a pipe of their own), then imports nothing until it is given work. It runs at ``NICE``: on a busy machine the server's own thread and the
machine's other work go first, and the helper takes only what is idle.

What it is told, over that pipe (frames of a kind byte, a 4-byte length and the payload):

- ``J`` (jobs): a pickled ``(chunk, jobs)``; the helper loads the jobs a chunk at a time *from
  the end* of the list (its chunk 0 is the last) and answers ``s`` (started) then ``d`` (done,
  the pickled ``Loaded`` records) per chunk, while the server's discovery loop loads from the
  front (``parallel_scan.HelperShare``). The loop takes a chunk the helper has done, waits for
  the one it has started (at most about what loading it would take), and claims one it has not
  started (``C``, the chunk's index), loading it itself; the helper starts no chunk at or past
  a claimed one. The two meet where their speeds put them: a helper starved of CPU costs the
  server only the decode of what it did deliver (about a tenth of loading it), never a wait
  for a share.
- ``X`` (exit), anything else, or the end of the pipe: the helper exits. A warm build takes
  the helper for its verdicts and closes it when its loop is done; ``dismiss`` (a catalog too
  small to share; the end of the first build whatever it was) kills a waiting one; either
  leaves a daemon thread to reap it.

The helper writes nothing on standard output (fd 1 becomes fd 2 first; fd 0 is ``/dev/null``)
and dies with the server: ``PR_SET_PDEATHSIG`` (``SIGKILL``), a check that the server did not
die before that was set, and the end of its command pipe (only the server holds the write end).
Whatever fails - no fork (RLIMIT_NPROC, a seccomp filter), a helper that dies, is slow or
answers garbage - costs only the chunks it did not deliver, which the discovery loop loads as it
always did: the catalog is the same (tests/catalog/test_scan_helper.py compares).

This module is imported before the first answer: it imports only the standard library
(``pickle``, ``threading`` and the scanner when a build uses the helper).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("skill_mcp.catalog")

# Skills a helper loads per answer: small enough that the server, reaching a chunk the helper
# has started, waits at most a few milliseconds, large enough that a frame's cost is small.
CHUNK = 32
# From this many candidates a cold scan is shared with the helper (``parallel_scan.with_helper``).
# Below it the loop is done (25 ms at 100 skills) about when the helper has delivered its first chunk.
HELPER_FROM = 100
# Frames: one kind byte, then a 4-byte index (answers) or nothing (commands), then a 4-byte length.
JOBS, CLAIM, EXIT = b"J", b"C", b"X"
STARTED, DONE = b"s", b"d"
_PR_SET_PDEATHSIG = 1
NICE = 10  # the helper's CPU priority (as the search worker's): it runs on what is idle
PIPE_BYTES = 1 << 20  # fs.pipe-max-size's default: what an unprivileged process may ask for
# The modules a scan needs, imported at once by a primed helper (the first ``load_skill`` would
# import PyYAML through ``yaml12``).
_SCANNER = ("skill_mcp.catalog.parallel_scan", "skill_mcp.catalog.yaml12")


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def single_threaded() -> bool:
    """True when the process runs one thread of any kind (so a fork copies no held lock)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # pragma: no cover - no procfs: assume threads
        return False


class Helper:
    """The server's side of one helper: its pid, the command pipe's write end and the answer
    pipe's read end. Used by one build at most; ``close`` kills and reaps it."""

    __slots__ = ("answers", "closed", "commands", "pid", "primed", "reaper", "verdicts")

    def __init__(self, pid: int, commands: int, answers: int, verdicts: int | None = None) -> None:
        self.pid = pid
        self.commands = commands
        self.answers = answers
        self.verdicts = verdicts  # the read end of the verdicts' pipe (``catalog.verdicts``), if asked for
        self.primed = False
        self.closed = False
        self.reaper: Any = None  # the thread that reaps it once closed

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        """One command frame, written whole, blocking (raises OSError if the helper is gone);
        a build sends its frames through ``HelperShare``, which never blocks."""
        frame = kind + len(payload).to_bytes(4, "big") + payload
        view = memoryview(frame)
        while view:
            view = view[os.write(self.commands, view) :]

    def close(self) -> None:
        """Kill the helper and close both pipes (idempotent, never raises); a daemon thread
        reaps it (``reaper``), so the caller does not wait for its exit (a millisecond or two)."""
        if self.closed:
            return
        self.closed = True
        for fd in (self.commands, self.answers, self.verdicts):
            if fd is None:
                continue
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)  # not reaped yet: the pid is still ours
        import threading

        try:
            self.reaper = threading.Thread(target=_reap, args=(self.pid,), name="skill-mcp-reap", daemon=True)
            self.reaper.start()
        except RuntimeError:  # no thread to be had: reap here
            _reap(self.pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.waitpid(pid, 0)


_helper: list[Helper] = []  # the one waiting helper, while there is one


def start(*, prime: bool = False, primed: bool = False, verify: tuple[Path, list[Path]] | None = None) -> bool:
    """Fork the helper if this process is single-threaded, on Linux, with a second core; True
    if it started. ``prime``: the helper imports the scanner at once (``likely_cold``);
    ``primed``: the scanner is already imported here (the fork has it too); ``verify``: the
    cache directory and the roots of a warm start, whose cache file's directory stamps the
    helper checks first (``catalog.verdicts``)."""
    if _helper or not sys.platform.startswith("linux") or cores() < 2 or not single_threaded():
        return False
    try:
        cmd_r, cmd_w = os.pipe()
    except OSError:
        return False
    try:
        ans_r, ans_w = os.pipe()
    except OSError:
        os.close(cmd_r)
        os.close(cmd_w)
        return False
    ver: tuple[int, int] | None = None
    if verify is not None:
        with contextlib.suppress(OSError):
            ver = os.pipe()
    for fd in (cmd_w, ans_w):  # room for a large job list and several answers (best effort)
        with contextlib.suppress(OSError, AttributeError):
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:  # no process to be had: the scan stays serial
        log.debug("no scan helper (%s)", exc)
        for fd in (cmd_r, cmd_w, ans_r, ans_w, *(ver or ())):
            os.close(fd)
        return False
    if pid == 0:  # pragma: no cover - the helper's side (covered in the child, not counted)
        code = 0
        try:
            os.close(cmd_w)
            os.close(ans_r)
            if ver is not None:
                os.close(ver[0])
            _child(cmd_r, ans_w, parent, prime and not primed, None if ver is None else (ver[1], verify))
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(cmd_r)
    os.close(ans_w)
    if ver is not None:
        os.close(ver[1])
        os.set_blocking(ver[0], False)  # the build reads verdicts as they come, never waits
    helper = Helper(pid, cmd_w, ans_r, None if ver is None else ver[0])
    helper.primed = prime or primed
    _helper.append(helper)
    return True


def waiting() -> Helper | None:
    """The helper waiting for work, if any (not taken)."""
    return _helper[0] if _helper else None


def take() -> Helper | None:
    """The waiting helper, for one build to use (and close); None when there is none."""
    return _helper.pop() if _helper else None


def likely_cold(cache_dir: Path | None) -> bool:
    """True when the first build will scan every skill: no cache, or no catalog in it yet (a
    catalog there may still be for other roots or another release: that build is cold too, and
    its helper imports the scanner when the jobs arrive)."""
    if cache_dir is None:
        return True
    try:
        with os.scandir(cache_dir) as entries:
            return not any(entry.name.startswith("catalog-") for entry in entries)
    except OSError:
        return True  # no cache directory yet: nothing cached


def start_for(cache_dir: Path | None, roots: list[Path]) -> bool:
    """``start`` as a server's first build wants it: primed when nothing is cached
    (``likely_cold``: the helper imports the scanner at once), else checking the warm cache's
    directory stamps first (``verify``). Does nothing where ``start`` cannot (threads running,
    one core, a helper waiting already). True when nothing is cached."""
    cold = likely_cold(cache_dir)
    start(prime=cold, verify=None if cold or cache_dir is None else (cache_dir, list(roots)))
    return cold


def dismiss() -> None:
    """The build does not need the waiting helper (a warm start, a small catalog): end it now."""
    helper = take()
    if helper is not None:
        helper.close()


# -- the helper's side ---------------------------------------------------------------------


def _child(
    commands: int, answers: int, parent: int, prime: bool, verify: tuple[int, Any] | None = None
) -> None:  # pragma: no cover - in the child
    os.dup2(2, 1)  # nothing the helper prints may reach the protocol's stdout
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the server's to handle
    with contextlib.suppress(OSError):
        os.nice(NICE)  # a busy machine's CPU goes to the server's own thread and the others first
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the server died before the signal was asked for
        return
    if prime:
        _import_scanner()
    if verify is not None:
        out, (cache_dir, roots) = verify
        try:
            _verify(cache_dir, roots, out, commands)
        finally:
            os.close(out)
    serve(commands, answers)


def _verify(cache_dir: Path, roots: list[Path], out: int, commands: int) -> None:  # pragma: no cover - in the child
    """Check the warm cache's directory stamps (``catalog.verdicts``) until the server gives
    other work or goes."""
    from skill_mcp.catalog import verdicts
    from skill_mcp.catalog.cache import cache_file

    told = select.poll()
    told.register(commands, select.POLLIN)
    with contextlib.suppress(OSError, ValueError):
        verdicts.verify(cache_file(cache_dir, verdicts.roots_real(roots)), out, lambda: bool(told.poll(0)))


def _read_exactly(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``, or None at its end."""
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def serve(commands: int, answers: int, load: Callable[[list[Any]], list[Any]] | None = None) -> None:
    """The helper's loop: scan on ``J`` (then return), return on anything else
    or at the end of ``commands``. ``load`` loads a list of jobs (``parallel_scan.load_share``)."""
    while True:
        head = _read_exactly(commands, 5)
        if head is None:
            return
        payload = _read_exactly(commands, int.from_bytes(head[1:5], "big"))
        if payload is None:
            return
        kind = head[:1]
        if kind == JOBS:
            _scan(payload, commands, answers, load)
            return
        else:
            return


def _import_scanner() -> None:
    import importlib

    for name in _SCANNER:
        importlib.import_module(name)


def _scan(payload: bytes, commands: int, answers: int, load: Callable[[list[Any]], list[Any]] | None) -> None:
    """Load the jobs a chunk at a time from the end (chunk 0 is the last), until the next chunk
    is one the server has claimed (or the server says exit, or goes)."""
    import pickle

    if load is None:
        from skill_mcp.catalog.parallel_scan import load_share

        load = load_share
    chunk, jobs = pickle.loads(payload)  # noqa: S301 - the server's own order, over its own pipe
    told = select.poll()
    told.register(commands, select.POLLIN)
    limit = -(-len(jobs) // chunk)  # chunks at and above this one are the server's
    end, index = len(jobs), 0
    while index < limit:
        while told.poll(0):  # what the server said meanwhile: claims, exit, or its end
            head = _read_exactly(commands, 5)
            body = None if head is None else _read_exactly(commands, int.from_bytes(head[1:5], "big"))
            if head is None or body is None or head[:1] != CLAIM:
                return
            limit = min(limit, int.from_bytes(body, "big"))
        if index >= limit:
            return
        start = max(0, end - chunk)
        where = index.to_bytes(4, "big")
        _write_all(answers, STARTED + where + bytes(4))
        raw = pickle.dumps(load(jobs[start:end]), protocol=pickle.HIGHEST_PROTOCOL)
        _write_all(answers, DONE + where + len(raw).to_bytes(4, "big") + raw)
        end, index = start, index + 1
