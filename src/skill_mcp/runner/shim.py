"""The server's side of the exec shim (``_exec_shim.py``): start one, hand it a run, or discard it.

A ``Shim`` is one ``python -I -S _exec_shim.py`` process that holds nothing of the server: an
empty environment, cwd ``/``, stdin ``/dev/null``, a session of its own, and exactly four pipe
ends, all made for it alone: the configuration's read end, the status pipe's write end and the
write ends of the stdout and stderr capture pipes. The capture pipes are made here, when the
shim is started, rather than passed later with ``SCM_RIGHTS``: a shim serves one run, so its
pipes serve one run too, and nothing can fail or be truncated in a descriptor transfer at the
moment the run starts.

The same code makes a shim ahead of a run (*warm*, waiting on its configuration pipe) and at the
run (*cold*). ``hand_over`` sends the run and returns once the shim has exec'd the script, so
the process and its pipes are the script's from then on. ``ShimGone`` says the shim died before
it reached ``execve``: nothing of the run happened, and the caller may start another shim.

Start shims from the thread that runs the event loop: the parent-death signal fires when the
*thread* that forked the child ends, not only the process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import select
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from skill_mcp.errors import SkillMcpError
from skill_mcp.proctools import killpg
from skill_mcp.reasons import Refusal

SHIM = str(Path(__file__).with_name("_exec_shim.py"))
# The directory holding the ``skill_mcp`` package: the shim runs with ``-S`` (no site-packages,
# and so no editable install's finder) and imports ``skill_mcp.confine`` from here.
PACKAGE_DIR = str(Path(__file__).resolve().parents[2])
EXEC_NEXT = b"\x00"  # _exec_shim.EXEC_NEXT: written just before execve
STATUS_CAP = 4096
KILL_WAIT_S = 5.0  # after SIGKILL; only a process stuck in the kernel takes longer


class ShimGone(Exception):
    """The shim exited before it reached ``execve``; the run never started in it."""


# A shim failure line starts with the exception's type name; ``BlockingIOError`` is EAGAIN, which
# ``execve`` after the uid drop returns when that uid is at RLIMIT_NPROC. The refusal carries it
# as ``errno`` so the spawner, which knows the identity and the limit, can say what to change.
_EAGAIN_LINE = b"BlockingIOError:"
EAGAIN = "EAGAIN"


async def _write_all(fd: int, data: bytes) -> None:
    import anyio

    view = memoryview(data)
    while view:
        await anyio.wait_writable(fd)
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue


async def _read_status(fd: int) -> bytes:
    import anyio

    out = b""
    while True:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, STATUS_CAP)
        except BlockingIOError:
            continue
        if not chunk:
            return out
        out += chunk[: STATUS_CAP - len(out)]


def prctl_dir() -> str:
    """Where python-prctl is installed: the shim runs with ``-S`` (no site-packages), so it is told.

    Located without importing it; the shim is this interpreter, so the server's copy is the one
    that fits.
    """
    spec = importlib.util.find_spec("prctl")
    if spec is None or spec.origin is None:
        raise SkillMcpError(Refusal.SPAWN_FAILED, "python-prctl is not installed; the exec shim needs it")
    return os.path.dirname(spec.origin)


@dataclass(slots=True)
class Shim:
    proc: subprocess.Popen[bytes]
    pidfd: int
    out_r: int  # the script's stdout, read end
    err_r: int
    cfg_w: int
    st_r: int
    _open: set[int] = field(default_factory=set, repr=False)

    @classmethod
    def start(cls, python: str) -> Shim:
        """Start a shim that waits for its run; ``spawn-failed`` when the OS refuses."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        cfg_r, cfg_w = os.pipe()
        st_r, st_w = os.pipe()
        ours = (out_r, err_r, cfg_w, st_r)
        try:
            proc = subprocess.Popen(
                [python, "-I", "-S", SHIM, str(cfg_r), str(st_w), str(os.getpid()), prctl_dir(), PACKAGE_DIR],
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                cwd="/",
                env={},
                start_new_session=True,
                pass_fds=(cfg_r, st_w),
                close_fds=True,
            )
        except OSError as exc:
            for fd in ours:
                os.close(fd)
            data = {"errno": EAGAIN} if isinstance(exc, BlockingIOError) else {}
            raise SkillMcpError(Refusal.SPAWN_FAILED, f"could not start the script: {exc.strerror}", data) from None
        finally:
            for fd in (out_w, err_w, cfg_r, st_w):
                os.close(fd)
        try:
            pidfd = os.pidfd_open(proc.pid)
        except OSError as exc:
            killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for fd in ours:
                os.close(fd)
            raise SkillMcpError(Refusal.SPAWN_FAILED, f"could not watch the script: {exc.strerror}") from None
        for fd in ours:
            os.set_blocking(fd, False)
        return cls(proc, pidfd, out_r, err_r, cfg_w, st_r, set(ours))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exited(self) -> bool:
        return bool(select.select([self.pidfd], [], [], 0)[0])

    async def hand_over(self, cfg: bytes) -> None:
        """Send the run; return once the script runs. ``ShimGone`` or ``spawn-failed`` otherwise.

        Unbounded here: the caller bounds it with the run's deadline.
        """
        try:
            await _write_all(self.cfg_w, cfg)
        except BrokenPipeError:
            raise ShimGone from None
        self._close(self.cfg_w)  # EOF tells the shim the configuration is complete
        status = await _read_status(self.st_r)
        self._close(self.st_r)
        if not status:
            raise ShimGone
        failure = status.removeprefix(EXEC_NEXT)
        if failure:
            self.proc.wait()  # it exits right after writing the line
            raise SkillMcpError(
                Refusal.SPAWN_FAILED,
                "could not start the script: " + failure.decode(errors="replace"),
                {"errno": EAGAIN} if failure.startswith(_EAGAIN_LINE) else {},
            )

    def discard(self) -> None:
        """Kill it (its group: the process leads one), reap it, close every end. Idempotent."""
        if self.proc.returncode is None:
            killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(KILL_WAIT_S)
        self.close()

    def close(self) -> None:
        """Close what this side still holds (the pidfd and the pipe ends). Idempotent."""
        for fd in tuple(self._open):
            self._close(fd)
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1

    def _close(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            os.close(fd)


@dataclass(slots=True)
class WarmSlot:
    """At most one shim waiting for the next run; a shim taken from it is never put back.

    ``LocalSpawner`` closes it at server stop (``stop_running``) and, as a safety net, when the
    spawner is collected or the interpreter exits (``weakref.finalize``), so a shim that is never
    used does not outlive its server even where no closer runs.
    """

    python: str
    shim: Shim | None = None
    closed: bool = False

    def fill(self) -> None:
        if self.closed or self.shim is not None:
            return
        with contextlib.suppress(SkillMcpError):  # the run will start one cold and report the failure
            self.shim = Shim.start(self.python)

    def take(self) -> Shim | None:
        """The waiting shim, now the caller's alone; ``None`` when there is none or it died."""
        shim, self.shim = self.shim, None
        if shim is not None and shim.exited():
            shim.discard()  # reaped now, so it leaves no zombie
            return None
        return shim

    def close(self) -> None:
        """Discard the waiting shim and start no other. Idempotent."""
        self.closed = True
        shim, self.shim = self.shim, None
        if shim is not None:
            shim.discard()
