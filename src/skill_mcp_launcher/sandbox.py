"""One script run, as the script uid, with bounded capture and a sweep afterwards.

The order inside the forked child is the privilege-drop pipeline: new session, standard
streams, descriptors closed, resource limits (while still allowed to set them), the OOM score
(1000: the first process the kernel kills when memory runs out), groups,
gid, uid, no-new-privileges, the run's kernel sandbox (``skill_mcp.confine``: Landlock and a
seccomp filter, from the rules the broker built from its own decision), then ``execve`` in the
skill's directory. A failure at any step is
reported through a close-on-exec pipe and the child exits; nothing runs half-dropped. The
run's private scratch directory is made before the fork and removed after the sweep, both by
the privileged side (``isolation``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from skill_mcp import confine, outputs
from skill_mcp.limits import DRAIN_S, SCRIPT_OOM_SCORE_ADJ, TERM_GRACE_S, Capture, Limits, set_oom_score_adj
from skill_mcp.proctools import killpg
from skill_mcp.sandbox_rules import Sandbox
from skill_mcp_launcher import procs

# The limits, the capture bound and the grace periods live in skill_mcp.limits (shared with
# the standalone spawner); ``Limits`` and ``Capture`` are re-exported for the broker.
__all__ = ["DRAIN_S", "TERM_GRACE_S", "Capture", "Job", "Limits", "Outcome", "run"]

HARD_EXTRA_S = 2.0


@dataclass(frozen=True, slots=True)
class Job:
    """A plan that passed every check in ``checks``; nothing here is taken on trust."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str] = field(repr=False)
    timeout_s: float
    egress: tuple[str, ...]


def _child(
    job: Job,
    env: Mapping[str, str],
    account: procs.Account,
    limits: Limits,
    rules: Sandbox | None,
    out_w: int,
    err_w: int,
    report_w: int,
) -> None:  # pragma: no cover - runs in the child
    step = "setsid"
    try:
        procs.reset_signals()
        os.setsid()
        step = "stdio"
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        procs.close_fds_from(3, keep=(report_w,))
        step = "rlimits"
        for which, value in limits.pairs():
            resource.setrlimit(which, (value, value))
        step = "oom_score_adj"
        # Before the drop: the file belongs to root. The script, not the server, is what the OOM
        # killer ends when a run's processes fill the container's memory.
        if set_oom_score_adj(SCRIPT_OOM_SCORE_ADJ) != SCRIPT_OOM_SCORE_ADJ:
            raise RuntimeError("oom_score_adj did not take")
        step = "drop"
        procs.drop_to(account)
        step = "chdir"
        os.chdir(job.cwd)
        if rules is not None:
            step = "sandbox"
            confine.apply(rules)
        step = "exec"
        os.execve(job.argv[0], list(job.argv), dict(env))  # noqa: S606 - an argv array, never a shell
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            os.write(report_w, f"{step}: {exc}".encode("utf-8", "replace")[:1024])
    os._exit(127)


@dataclass(slots=True)
class Outcome:
    status: int | None = None
    timed_out: bool = False
    server_gone: bool = False
    spawn_error: str | None = None
    out: Capture = field(default_factory=Capture)
    err: Capture = field(default_factory=Capture)
    remaining: int = 0
    scratch_left: bool = False
    cleanup: procs.CleanupState = "done"
    duration_ms: int = 0
    outputs: outputs.Collected | None = None  # what the script left in its output directory


def run(
    job: Job,
    env: Mapping[str, str],
    account: procs.Account,
    limits: Limits,
    reaper: procs.Reaper,
    scratch: str,
    stopping: Callable[[], bool] = lambda: False,
    server_fd: int | None = None,
    wake_fd: int | None = None,
    cleanup: procs.Cleanup | None = None,
    outputs_dir: str | None = None,
    side: tuple[int, Callable[[bytes], None]] | None = None,
    *,
    rules: Sandbox | None,
) -> Outcome:
    """Fork, drop, exec; capture under caps until exit or deadline; then sweep the uid.

    ``scratch`` is the run's directory (``isolation.make_scratch``): removed here, after the sweep,
    through ``cleanup`` (the broker's, which outlives this run when the removal is not done in time).

    ``server_fd`` is the server's pidfd: when it turns readable the server has died, nobody
    will read this run's result, and the run ends at once (SIGKILL, then the sweep) instead of
    running on until its own timeout. ``wake_fd`` is the signal wakeup pipe: a stop signal
    must wake the capture loop so that ``stopping`` is asked at once, not at the next output.

    ``side`` is one more descriptor drained during the run into its callback (the proxy's log),
    so that its writer never blocks on a full pipe.

    ``outputs_dir`` (inside ``scratch``) is read after every process of the uid is killed and
    before anything is removed, by descriptor (``skill_mcp.outputs``): root reads there only
    the script uid's own single-link regular files, and no process is left to swap them.
    ``rules`` is the run's kernel sandbox (``sandbox_rules.appliance_sandbox``), applied in the child
    after the drop; the broker never runs a script without one (``None`` is for tests of the
    drop pipeline alone).
    """
    result = Outcome()
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover
        _child(job, env, account, limits, rules, out_w, err_w, rep_w)
    reaper.watch(pid)
    for fd in (out_w, err_w, rep_w):
        os.close(fd)
    try:
        _supervise(
            pid, job.timeout_s, out_r, err_r, rep_r, reaper, result, started, stopping, (server_fd, wake_fd), side
        )
    finally:
        # The sweep kills whatever still holds the pipes (a detached grandchild), so the
        # final read below meets end-of-file instead of waiting on a process we do not own.
        cleanup = cleanup if cleanup is not None else procs.Cleanup(account)

        def collect() -> None:
            if outputs_dir is not None:
                result.outputs = outputs.collect(outputs_dir, uid=account.uid)

        result.cleanup = cleanup.after_run(reaper, scratch, between=collect)
        result.remaining = cleanup.remaining
        for fd, cap in ((out_r, result.out), (err_r, result.err)):
            _read_rest(fd, cap)
        os.close(rep_r)
        if result.status is None:
            result.status = reaper.wait(pid, 1.0)
        result.scratch_left = os.path.lexists(scratch)
        result.duration_ms = int((time.monotonic() - started) * 1000)
    return result


@dataclass(slots=True)
class _Supervisor:
    """The capture loop's state: which pipes are open, which deadline comes next."""

    pid: int
    pidfd: int
    rep_r: int
    result: Outcome
    reaper: procs.Reaper
    deadline: float
    caps: dict[int, Capture]
    kill_at: float | None = None
    drain_until: float | None = None
    report: bytearray = field(default_factory=bytearray)
    stopping: Callable[[], bool] = lambda: False
    server_fd: int | None = None
    wake_fd: int | None = None
    server_gone: bool = False
    side: tuple[int, Callable[[bytes], None]] | None = None

    def done(self, now: float) -> bool:
        if self.server_gone:
            return True  # the finally in ``run`` sweeps the uid and reaps
        if self.drain_until is not None and (now >= self.drain_until or not self.caps):
            return True
        # Still not dead well past SIGKILL (stuck in the kernel): the sweep keeps trying.
        return now >= self.deadline + TERM_GRACE_S + HARD_EXTRA_S

    def enforce_deadline(self, now: float) -> None:
        if self.result.status is None and not self.result.timed_out and self.stopping():
            # The container is being stopped: end the run now rather than hold shutdown.
            self.deadline = min(self.deadline, now)
        if self.result.status is None and now >= self.deadline and not self.result.timed_out:
            self.result.timed_out = True
            killpg(self.pid, signal.SIGTERM)
            self.kill_at = now + TERM_GRACE_S
        if self.kill_at is not None and now >= self.kill_at and self.result.status is None:
            killpg(self.pid, signal.SIGKILL)
            self.kill_at = None

    def wait_for(self, now: float) -> float:
        wake = [t for t in (self.deadline, self.kill_at, self.drain_until) if t is not None and t > now]
        return max(0.0, min(wake) - now) if wake else 0.05

    def on_ready(self, fd: int, sel: selectors.BaseSelector) -> None:
        if self.side is not None and fd == self.side[0]:
            chunk = _read(fd)
            if chunk == b"":
                sel.unregister(fd)
            elif chunk:
                self.side[1](chunk)
            return
        if fd == self.wake_fd:
            _read(fd)  # a signal arrived; enforce_deadline asks ``stopping`` on this turn
            return
        if fd == self.server_fd:
            # The server died mid-run: its script must not outlive it by a single timeout.
            self.server_gone = self.result.server_gone = True
            killpg(self.pid, signal.SIGKILL)
            sel.unregister(fd)
            return
        if fd == self.pidfd:
            self.reaper.reap()
            status = self.reaper.pop(self.pid)
            if status is not None:
                self.result.status = status
                self.drain_until = time.monotonic() + DRAIN_S
                sel.unregister(fd)
            return
        chunk = _read(fd)
        if chunk is None:
            return
        if not chunk:
            sel.unregister(fd)
            self.caps.pop(fd, None)
        elif fd == self.rep_r:
            self.report += chunk[:2048]
            self.result.spawn_error = self.report.decode("utf-8", "replace")
        else:
            self.caps[fd].add(chunk)


def _supervise(
    pid: int,
    timeout_s: float,
    out_r: int,
    err_r: int,
    rep_r: int,
    reaper: procs.Reaper,
    result: Outcome,
    started: float,
    stopping: Callable[[], bool],
    watch: tuple[int | None, int | None],
    side: tuple[int, Callable[[bytes], None]] | None = None,
) -> None:
    """Capture until the script has exited and its pipes are drained, the server died, or the hard bound."""
    pidfd = os.pidfd_open(pid)
    sup = _Supervisor(
        pid=pid,
        pidfd=pidfd,
        rep_r=rep_r,
        result=result,
        reaper=reaper,
        deadline=started + timeout_s,
        caps={out_r: result.out, err_r: result.err},
        stopping=stopping,
        server_fd=watch[0],
        wake_fd=watch[1],
    )
    sel = selectors.DefaultSelector()
    try:
        for fd in (out_r, err_r, rep_r):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        sel.register(pidfd, selectors.EVENT_READ)
        for watched in watch:
            if watched is not None:
                sel.register(watched, selectors.EVENT_READ)
        if side is not None:
            sup.side = side
            sel.register(side[0], selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if sup.done(now):
                return
            sup.enforce_deadline(now)
            for key, _ in sel.select(sup.wait_for(now)):
                sup.on_ready(key.fd, sel)
    finally:
        sel.close()
        os.close(pidfd)


def _read(fd: int) -> bytes | None:
    """A chunk, ``b""`` at end of file, or ``None`` when nothing is ready after all."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _read_rest(fd: int, cap: Capture) -> None:
    """Read what is left after the sweep; every writer is dead, so this ends quickly."""
    deadline = time.monotonic() + 2.0
    os.set_blocking(fd, False)
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        except OSError:
            break
        if not chunk:
            break
        cap.add(chunk)
    os.close(fd)
