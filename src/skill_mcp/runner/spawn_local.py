"""The standalone spawner: runs a ``RunPlan`` as a local subprocess, bounded in every way.

- argv array, no shell; cwd the skill directory; stdin ``/dev/null``; a new session (so the
  script leads its own process group); the environment is exactly ``plan.env`` with ``TMPDIR``
  set to a private directory made for this run and removed after it.
- Limits and the uid drop are applied by ``_exec_shim`` (a stdlib re-exec shim), never by a
  ``preexec_fn``: RLIMIT_CORE 0, RLIMIT_NOFILE, RLIMIT_FSIZE, and RLIMIT_NPROC when the script
  runs under a uid of its own. When the server runs as root the script is dropped to an
  unprivileged uid with no supplementary groups and no-new-privileges, or it does not run.
- 1 MiB captured per stream; the rest is read and discarded, and counted.
- The run settles on the process exiting (seen through a pidfd), never on the pipes closing:
  a deadline brings SIGTERM to the group, then SIGKILL after a grace; after the exit the pipes
  get a short drain and are then closed. A grandchild that left the group and still holds
  them does not hold the call, but it may survive: standalone mode cannot end it (the
  appliance's broker does, by killing every process of the script uid).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.runner.types import CAPTURE_LIMIT, DRAIN_S, TERM_GRACE_S, RunPlan, RunResult, RunStatus

SHIM = str(Path(__file__).with_name("_exec_shim.py"))
NOFILE = 256
FSIZE = 64 * 1024 * 1024
NPROC = 256
KILL_WAIT_S = 5.0  # after SIGKILL; only a process stuck in the kernel takes longer
STOPPED_NOTE = "the server is shutting down: the script was stopped before it finished"
DETACHED_NOTE = ("a process that left the script's process group still held its output open after the "
                 "script exited; the call returned without it, and in standalone mode it may still be running")


@dataclass(frozen=True, slots=True)
class UserDrop:
    """The unprivileged identity scripts run as when the server itself is root."""

    uid: int
    gid: int
    name: str

    def describe(self) -> str:
        return f"{self.name} (uid {self.uid}, gid {self.gid}, no supplementary groups, no-new-privileges)"


@dataclass(slots=True)
class _Capture:
    limit: int
    buf: bytearray = field(default_factory=bytearray)
    dropped: int = 0
    eof: anyio.Event = field(default_factory=anyio.Event)

    def add(self, data: bytes) -> None:
        room = self.limit - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        return self.buf.decode("utf-8", errors="replace")


async def _pump(fd: int, cap: _Capture) -> None:
    while True:
        await anyio.wait_readable(fd)
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            continue
        if not data:
            cap.eof.set()
            return
        cap.add(data)


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        await anyio.wait_writable(fd)
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue


async def _read_status(fd: int) -> bytes:
    out = b""
    while True:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            return out
        out += chunk[: 4096 - len(out)]


def _killpg(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _remove_tree(path: str) -> None:
    def fix(func: object, p: str, _exc: object) -> None:
        # A script may have made its files unreadable to itself; restore access and retry once.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
        with contextlib.suppress(OSError):
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=fix)  # onerror is deprecated from 3.12 on
    else:
        shutil.rmtree(path, onerror=fix)


@dataclass(slots=True)
class LocalSpawner:
    name: str = "local"
    drop: UserDrop | None = None
    shim_python: str = sys.executable
    capture_limit: int = CAPTURE_LIMIT
    term_grace_s: float = TERM_GRACE_S
    drain_s: float = DRAIN_S
    _waiting: anyio.CancelScope | None = field(default=None, repr=False)
    _stopping: bool = field(default=False, repr=False)

    def stop_running(self) -> None:
        """End the run in progress early (server shutdown): its call still returns a normal result.

        Call from the event loop's thread. The script's group gets SIGTERM, then SIGKILL after the
        grace, exactly as at a deadline; the result is ``killed`` with a note saying why.
        """
        self._stopping = True
        if self._waiting is not None:
            self._waiting.cancel()

    def _config(self, plan: RunPlan, tmp: str) -> bytes:
        env = dict(plan.env)
        env["TMPDIR"] = tmp
        limits: dict[str, tuple[int, int]] = {"core": (0, 0), "nofile": (NOFILE, NOFILE), "fsize": (FSIZE, FSIZE)}
        cfg: dict[str, object] = {"argv": list(plan.argv), "env": env, "rlimits": limits, "parent": os.getpid()}
        if self.drop is not None:
            env["HOME"] = tmp  # the server's HOME is not the dropped user's to write
            limits["nproc"] = (NPROC, NPROC)
            cfg.update(uid=self.drop.uid, gid=self.drop.gid)
        # marshal, not JSON: the shim then needs neither json nor re (tens of ms per run); the pipe is
        # a private channel from this process, so the format is never read from anyone else.
        return marshal.dumps(cfg)

    async def run(self, plan: RunPlan) -> RunResult:
        self._stopping = False
        tmp = tempfile.mkdtemp(prefix="skill-mcp-run-")
        try:
            if self.drop is not None:
                os.chown(tmp, self.drop.uid, self.drop.gid)
            return await self._run(plan, self._config(plan, tmp))
        finally:
            _remove_tree(tmp)

    async def _run(self, plan: RunPlan, cfg: bytes) -> RunResult:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        cfg_r, cfg_w = os.pipe()
        st_r, st_w = os.pipe()
        parent_ends = {out_r, err_r, cfg_w, st_r}  # closed exactly once, here or by _close_end
        for fd in parent_ends:
            os.set_blocking(fd, False)
        started = time.monotonic()
        try:
            try:
                proc = subprocess.Popen(
                    [self.shim_python, "-I", "-S", SHIM, str(cfg_r), str(st_w)],
                    stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, cwd=plan.cwd, env={},
                    start_new_session=True, pass_fds=(cfg_r, st_w), close_fds=True)
            except OSError as exc:
                raise SkillMcpError(Refusal.SPAWN_FAILED, f"could not start the script: {exc.strerror}") from None
            finally:
                for fd in (out_w, err_w, cfg_r, st_w):
                    os.close(fd)
            pidfd = os.pidfd_open(proc.pid)
            try:
                return await self._supervise(plan, proc, pidfd, (out_r, err_r, cfg_w, st_r), cfg, started,
                                             parent_ends)
            finally:
                os.close(pidfd)
                if proc.returncode is None:  # only reached if supervision itself failed
                    _killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        finally:
            for fd in parent_ends:
                with contextlib.suppress(OSError):
                    os.close(fd)

    async def _start(self, plan: RunPlan, proc: subprocess.Popen[bytes], cfg_w: int, st_r: int,
                     cfg: bytes, open_ends: set[int]) -> None:
        with anyio.move_on_after(plan.timeout_s):
            await _write_all(cfg_w, cfg)
            open_ends.discard(cfg_w)
            os.close(cfg_w)  # EOF tells the shim the configuration is complete
            status = await _read_status(st_r)
            if status:
                proc.wait()
                raise SkillMcpError(Refusal.SPAWN_FAILED, "could not start the script: "
                                    + status.decode(errors="replace"))
            return
        raise SkillMcpError(Refusal.SPAWN_FAILED, "the script did not start within its timeout")

    async def _supervise(self, plan: RunPlan, proc: subprocess.Popen[bytes], pidfd: int,
                         fds: tuple[int, int, int, int], cfg: bytes, started: float,
                         open_ends: set[int]) -> RunResult:
        out_r, err_r, cfg_w, st_r = fds
        out, err = _Capture(self.capture_limit), _Capture(self.capture_limit)
        timed_out = False
        # Until the shim has exec'd, nothing writes to stdout/stderr, so the pumps can start after.
        await self._start(plan, proc, cfg_w, st_r, cfg, open_ends)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump, out_r, out)
            tg.start_soon(_pump, err_r, err)
            remaining = plan.timeout_s - (time.monotonic() - started)
            with anyio.move_on_after(max(remaining, 0)) as waiting:
                self._waiting = waiting
                if self._stopping:  # asked to stop while the script was starting
                    waiting.cancel()
                await anyio.wait_readable(pidfd)
            self._waiting = None
            stopped = self._stopping
            if not _exited(pidfd):
                timed_out = not stopped
                await self._terminate(proc.pid, pidfd)
            # The leader is a zombie until reaped, so its pid (the group id) cannot be reused yet:
            # end whatever stayed in its group, then reap.
            _killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            with anyio.move_on_after(self.drain_s):
                await out.eof.wait()
                await err.eof.wait()
            held = not (out.eof.is_set() and err.eof.is_set())
            tg.cancel_scope.cancel()
        notes = ((STOPPED_NOTE,) if stopped else ()) + ((DETACHED_NOTE,) if held else ())
        return _result(proc.returncode, timed_out, out, err, started, notes)

    async def _terminate(self, pid: int, pidfd: int) -> None:
        _killpg(pid, signal.SIGTERM)
        with anyio.move_on_after(self.term_grace_s):
            await anyio.wait_readable(pidfd)
        if not _exited(pidfd):
            _killpg(pid, signal.SIGKILL)
            with anyio.move_on_after(KILL_WAIT_S):
                await anyio.wait_readable(pidfd)


def _exited(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def _result(code: int | None, timed_out: bool, out: _Capture, err: _Capture, started: float,
            notes: tuple[str, ...]) -> RunResult:
    sig = None
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            sig = signal.Signals(-code).name
    status: RunStatus = "timeout" if timed_out else "ok" if code == 0 else "killed" if sig else "error"
    return RunResult(status=status, exit_code=code if code is not None and code >= 0 else None, signal=sig,
                     stdout=out.text(), stderr=err.text(), truncated_stdout=out.dropped > 0,
                     truncated_stderr=err.dropped > 0, dropped_bytes=out.dropped + err.dropped,
                     duration_ms=int((time.monotonic() - started) * 1000), notes=notes)
