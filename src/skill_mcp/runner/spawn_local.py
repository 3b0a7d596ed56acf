"""The standalone spawner: runs a ``RunPlan`` as a local subprocess, bounded in every way.

- argv array, no shell; cwd the skill directory; stdin ``/dev/null``; a new session (so the
  script leads its own process group); the environment is exactly ``plan.env`` with ``TMPDIR``
  set to a private directory made for this run (``skill-mcp-run-<server pid>-<random>``, mode
  0700, the script user's when the server is root; ``runner.script_env.spawn_env``) and removed
  after it, once the run's process group is killed and reaped, by ``skill_mcp.trees`` (no
  recursion, no link followed, any depth). A removal that leaves anything refuses every later
  run (``cleanup-pending``) until a retry, made at the start of each, removes it: no run starts
  beside what an earlier one left. A server killed before it could remove one leaves it behind:
  the next spawner removes such directories when it is built, before its first run
  (``runner.rundirs``).
- Limits and the uid drop are applied by ``_exec_shim`` (a stdlib re-exec shim), never by a
  ``preexec_fn``: RLIMIT_CORE 0, RLIMIT_NOFILE, RLIMIT_FSIZE, and RLIMIT_NPROC when the script
  runs under a uid of its own. When the server runs as root the script is dropped to an
  unprivileged uid with no supplementary groups and no-new-privileges, or it does not run.
- The shim is started ahead of the run (``runner.shim``): from when a call passes its checks,
  and again right after each run, one shim waits, so a confirmed run pays for sending its configuration rather
  than for a Python start-up. It serves one run. If it died while it waited, the run starts a
  shim of its own instead (a *cold* start), which is what every run did before; the result is
  the same either way.
- 1 MiB captured per stream; the rest is read and discarded, and counted.
- The run settles on the process exiting (seen through a pidfd), never on the pipes closing:
  a deadline brings SIGTERM to the group, then SIGKILL after a grace; after the exit the pipes
  get a short drain and are then closed. A grandchild that left the group and still holds
  them does not hold the call, but it may survive: standalone mode cannot end it (the
  appliance's broker does, by killing every process of the script uid).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import marshal
import os
import signal
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

from skill_mcp import outputs
from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import SCRIPT_OOM_SCORE_ADJ, STANDALONE, Capture, run_status
from skill_mcp.proctools import killpg
from skill_mcp.reasons import Refusal
from skill_mcp.runner import rundirs
from skill_mcp.runner.script_env import spawn_env
from skill_mcp.runner.shim import EAGAIN, KILL_WAIT_S, Shim, ShimGone, WarmSlot
from skill_mcp.runner.types import CAPTURE_LIMIT, DRAIN_S, TERM_GRACE_S, OutputTap, RunPlan, RunResult
from skill_mcp.sandbox_rules import Sandbox, standalone_sandbox
from skill_mcp.trees import NotRemoved, remove_tree

# anyio is imported by what runs a script, not at import: building the spawner is part of the
# runner's first build, which the first skill_list answer can cause before the SDK and anyio are
# loaded (surfaces.stdio.early_calls).
if TYPE_CHECKING:  # pragma: no cover - typing only
    import anyio


def _anyio() -> ModuleType:
    import anyio

    return anyio


# The standalone limits (docs/fence.md's table): one home with the appliance's, in skill_mcp.limits.
NOFILE = STANDALONE.nofile
FSIZE = STANDALONE.fsize
NPROC = STANDALONE.nproc or 0
STOPPED_NOTE = "the server is shutting down: the script was stopped before it finished"
DETACHED_NOTE = (
    "a process that left the script's process group still held its output open after the "
    "script exited; the call returned without it, and in standalone mode it may still be running"
)
LEFT_NOTE = (
    "the run's directory could not be removed ({detail}); no later run starts until it is: each "
    "skill_run tries again first and is refused with cleanup-pending while anything is left"
)


@dataclass(frozen=True, slots=True)
class UserDrop:
    """The unprivileged identity scripts run as when the server itself is root."""

    uid: int
    gid: int
    name: str

    def describe(self) -> str:
        return f"{self.name} (uid {self.uid}, gid {self.gid}, no supplementary groups, no-new-privileges)"


def tasks_of_uid(uid: int) -> int | None:
    """How many processes and threads run as ``uid`` now (what RLIMIT_NPROC counts), from
    ``/proc``; ``None`` when it cannot be read. Only called to word a refusal."""
    total = 0
    try:
        pids = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return None
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
                status = dict(line.split(":", 1) for line in handle if ":" in line)
            if int(status["Uid"].split()[0]) == uid:
                total += int(status["Threads"])
    return total


def process_limit_error(err: SkillMcpError, drop: UserDrop | None) -> SkillMcpError:
    """``spawn-failed`` from EAGAIN, worded as what it is: the uid is at its process limit.

    RLIMIT_NPROC counts every process and thread of a uid on the machine, not only this
    server's: a script user shared with other software (``nobody`` often is) can be full before
    the script starts.
    """
    data = {**err.data, "limit": "RLIMIT_NPROC"}
    if drop is None:
        return SkillMcpError(
            Refusal.SPAWN_FAILED,
            "could not start the script: the system refused a new process "
            "(EAGAIN): this server's user is at its process limit (RLIMIT_NPROC, which counts "
            "every process and thread of the user on this machine); end some, or raise the limit",
            data,
        )
    running = tasks_of_uid(drop.uid)
    now = f", and has {running} now" if running is not None else ""
    return SkillMcpError(
        Refusal.SPAWN_FAILED,
        f"could not start the script: the system refused a new process (EAGAIN) for the script user {drop.name} "
        f"(uid {drop.uid}): scripts run with RLIMIT_NPROC {NPROC}, which counts every process and thread of that "
        f"user on this machine, not only this server's{now}. Set SKILL_MCP_SCRIPT_USER to a user of its own for "
        f"skill scripts, or end what else runs as {drop.name}",
        {**data, "scriptUser": drop.name, "nproc": NPROC, **({"running": running} if running is not None else {})},
    )


@dataclass(slots=True)
class _Capture(Capture):
    """The shared bounded capture (``skill_mcp.limits``), plus the event its pump sets at end of file."""

    eof: anyio.Event = field(default_factory=lambda: _anyio().Event())


async def _pump(fd: int, cap: _Capture, tap: Callable[[bytes], None] | None = None) -> None:
    import anyio

    while True:
        await anyio.wait_readable(fd)
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            continue
        if not data:
            cap.eof.set()
            return
        if tap is not None:
            tap(data)
        cap.add(data)


@dataclass(slots=True, weakref_slot=True)
class LocalSpawner:
    name: str = "local"
    drop: UserDrop | None = None
    shim_python: str = sys.executable
    capture_limit: int = CAPTURE_LIMIT
    term_grace_s: float = TERM_GRACE_S
    drain_s: float = DRAIN_S
    warm_ahead: bool = True  # False: every run starts its shim cold
    on_output: OutputTap | None = None  # sees the script's output as it is written (runner.types)
    # Every run in a kernel sandbox of its own (``sandbox_rules.standalone_sandbox``); False only when the
    # owner opted out (``SKILL_MCP_UNCONFINED=1``) on a kernel that cannot confine.
    confined: bool = True
    runtimes: tuple[str, ...] = ()  # the interpreters' real paths: their prefixes are readable
    _slot: WarmSlot = field(init=False, repr=False)
    _waiting: anyio.CancelScope | None = field(default=None, repr=False)
    _stopping: bool = field(default=False, repr=False)
    # Run directories whose removal left something: every later run is refused until they are gone.
    _unremoved: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        owners = {os.geteuid()} | ({self.drop.uid} if self.drop is not None else set())
        rundirs.remove_stale(tempfile.gettempdir(), frozenset(owners))
        self._slot = WarmSlot(self.shim_python, closed=not self.warm_ahead)
        weakref.finalize(self, self._slot.close)  # the slot, not self: the finalizer must not keep us alive

    def warm(self) -> None:
        """Have a shim waiting for the next run, unless one waits already or the server is stopping.

        Called when a ``skill_run`` call passed its checks (the preview) and right after each run;
        never at start-up. Only on the thread that runs the event loop, which lives as long as the server: the
        parent-death signal follows the thread that forked the shim, so a shim started from a worker
        thread would kill its script when that thread retires. Elsewhere this does nothing.
        """
        if _on_event_loop():
            self._slot.fill()

    @property
    def warm_pid(self) -> int | None:
        """The pid of the shim waiting for the next run, if one is."""
        return self._slot.shim.pid if self._slot.shim is not None else None

    def stop_running(self) -> None:
        """Server shutdown: end the run in progress early (its call still returns a normal result)
        and kill the shim waiting for the next one; no shim is started after this.

        Call from the event loop's thread. The script's group gets SIGTERM, then SIGKILL after the
        grace, exactly as at a deadline; the result is ``killed`` with a note saying why.
        """
        self._stopping = True
        self._slot.close()
        if self._waiting is not None:
            self._waiting.cancel()

    def _config(self, plan: RunPlan, tmp: str) -> bytes:
        env = spawn_env(plan.env, tmp, private_home=self.confined or self.drop is not None)
        limits: dict[str, tuple[int, int]] = {"core": (0, 0), "nofile": (NOFILE, NOFILE), "fsize": (FSIZE, FSIZE)}
        cfg: dict[str, object] = {
            "argv": list(plan.argv),
            "env": env,
            "cwd": plan.cwd,
            "rlimits": limits,
            "oom_score_adj": SCRIPT_OOM_SCORE_ADJ,
            "sandbox": self.sandbox(plan, tmp).wire() if self.confined else None,
        }
        if self.drop is not None:
            limits["nproc"] = (NPROC, NPROC)
            cfg.update(uid=self.drop.uid, gid=self.drop.gid)
        # marshal, not JSON: the shim then imports neither json nor re, whose import is a large part
        # of a cold start (bench/README.md, "Figures behind design choices"); the pipe is a private
        # channel from this process, so the format is never read from anyone else.
        return marshal.dumps(cfg)

    def sandbox(self, plan: RunPlan, tmp: str) -> Sandbox:
        """The run's sandbox, from the plan alone: its skill, its run directory, MCP_DATA_DIR, egress."""
        return standalone_sandbox(
            skill_dir=plan.cwd,
            run_dir=tmp,
            interpreters=(plan.interpreter_path, *self.runtimes),
            data_dir=plan.env.get("MCP_DATA_DIR") or None,
            egress=bool(plan.egress),
        )

    async def run(self, plan: RunPlan) -> RunResult:
        import anyio
        import anyio.to_thread

        # The wall clock starts now, before any shim is handed the run: the time a shim still takes
        # to start (a cold one, or a warm one not ready yet) is part of the script's budget.
        started = time.monotonic()
        self._stopping = False
        await self._remove_unremoved()
        tmp = rundirs.make()
        try:
            out_dir = outputs.make_output_dir(tmp)
            if self.drop is not None:
                os.chown(tmp, self.drop.uid, self.drop.gid)
                os.chown(out_dir, self.drop.uid, self.drop.gid)
            shim = await self._launch(plan, self._config(plan, tmp), started)
            try:
                result = await self._supervise(plan, shim, started)
            finally:
                shim.discard()  # reaped by now unless supervision itself failed; then killed here
            # Read by descriptor only, as the script's own files (see skill_mcp.outputs): the
            # process group is gone; a detached grandchild still writing loses its file.
            # Up to 32 MiB of reads: off the event loop.
            owner = self.drop.uid if self.drop is not None else os.geteuid()
            found = await anyio.to_thread.run_sync(functools.partial(outputs.collect, out_dir, uid=owner))
            result = dataclasses.replace(result, outputs=found)
        finally:
            left = await self._remove(tmp)
            # The next run's shim starts now, not while this script runs: its start-up would compete
            # with the script and this call for the CPU, which was measured to cost the run more.
            self.warm()
        if left is not None:
            result = dataclasses.replace(result, notes=(*result.notes, LEFT_NOTE.format(detail=left)))
        return result

    async def _remove(self, path: str) -> str | None:
        """Remove a run directory (off the event loop: a million files take seconds, and a cancelled
        call must not skip it); ``None`` when it is gone, else why not, remembered for later runs."""
        import anyio
        import anyio.to_thread

        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(remove_tree, path)
            except NotRemoved as exc:
                if path not in self._unremoved:
                    self._unremoved.append(path)
                return str(exc)
        if path in self._unremoved:
            self._unremoved.remove(path)
        return None

    async def _remove_unremoved(self) -> None:
        """Before a run: retry what earlier removals left; refuse the run while anything is."""
        for path in list(self._unremoved):
            left = await self._remove(path)
            if left is not None:
                raise SkillMcpError(
                    Refusal.CLEANUP_PENDING, f"an earlier run's directory is not removed yet: {left}", {"path": path}
                )

    async def _launch(self, plan: RunPlan, cfg: bytes, started: float) -> Shim:
        """A shim that has exec'd the script: the warm one, or one started now if none is usable."""
        warm = self._slot.take()
        if warm is not None:
            try:
                return await self._hand_over(warm, cfg, started + plan.timeout_s)
            except ShimGone:
                pass  # it died while it waited, before it touched the run: start one as if none were warm
        try:
            cold = Shim.start(self.shim_python)
        except SkillMcpError as err:
            # The fork of the shim runs as this server's user, before any drop.
            raise (process_limit_error(err, None) if err.data.get("errno") == EAGAIN else err) from None
        try:
            return await self._hand_over(cold, cfg, started + plan.timeout_s)
        except ShimGone:
            raise SkillMcpError(
                Refusal.SPAWN_FAILED, "could not start the script: the exec shim exited before it reached execve"
            ) from None

    async def _hand_over(self, shim: Shim, cfg: bytes, deadline: float) -> Shim:
        import anyio

        try:
            with anyio.move_on_after(max(deadline - time.monotonic(), 0)):
                await shim.hand_over(cfg)
                return shim
            raise SkillMcpError(Refusal.SPAWN_FAILED, "the script did not start within its timeout")
        except SkillMcpError as err:
            shim.discard()
            if err.data.get("errno") == EAGAIN:
                raise process_limit_error(err, self.drop) from None
            raise
        except BaseException:
            shim.discard()
            raise

    async def _supervise(self, plan: RunPlan, shim: Shim, started: float) -> RunResult:
        import anyio

        out, err = _Capture(self.capture_limit), _Capture(self.capture_limit)
        timed_out = False
        async with anyio.create_task_group() as tg:
            tap = self.on_output
            tg.start_soon(_pump, shim.out_r, out, functools.partial(tap, "stdout") if tap else None)
            tg.start_soon(_pump, shim.err_r, err, functools.partial(tap, "stderr") if tap else None)
            remaining = plan.timeout_s - (time.monotonic() - started)
            with anyio.move_on_after(max(remaining, 0)) as waiting:
                self._waiting = waiting
                if self._stopping:  # asked to stop while the script was starting
                    waiting.cancel()
                await anyio.wait_readable(shim.pidfd)
            self._waiting = None
            stopped = self._stopping
            if not shim.exited():
                timed_out = not stopped
                await self._terminate(shim)
            # The leader is a zombie until reaped, so its pid (the group id) cannot be reused yet:
            # end whatever stayed in its group, then reap.
            killpg(shim.pid, signal.SIGKILL)
            shim.proc.wait()
            with anyio.move_on_after(self.drain_s):
                await out.eof.wait()
                await err.eof.wait()
            held = not (out.eof.is_set() and err.eof.is_set())
            tg.cancel_scope.cancel()
        notes = ((STOPPED_NOTE,) if stopped else ()) + ((DETACHED_NOTE,) if held else ())
        return _result(shim.proc.returncode, timed_out, out, err, started, notes)

    async def _terminate(self, shim: Shim) -> None:
        import anyio

        killpg(shim.pid, signal.SIGTERM)
        with anyio.move_on_after(self.term_grace_s):
            await anyio.wait_readable(shim.pidfd)
        if not shim.exited():
            killpg(shim.pid, signal.SIGKILL)
            with anyio.move_on_after(KILL_WAIT_S):
                await anyio.wait_readable(shim.pidfd)


def _on_event_loop() -> bool:
    import anyio

    try:
        anyio.get_current_task()
    except RuntimeError:  # anyio.NoEventLoopError (older anyio: sniffio's), both RuntimeErrors
        return False
    return True


def _result(
    code: int | None, timed_out: bool, out: _Capture, err: _Capture, started: float, notes: tuple[str, ...]
) -> RunResult:
    sig = None
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            sig = signal.Signals(-code).name
    status = run_status(code, sig, timed_out)
    return RunResult(
        status=status,
        exit_code=code if code is not None and code >= 0 else None,
        signal=sig,
        stdout=out.text(),
        stderr=err.text(),
        truncated_stdout=out.dropped > 0,
        truncated_stderr=err.dropped > 0,
        dropped_bytes=out.dropped + err.dropped,
        duration_ms=int((time.monotonic() - started) * 1000),
        notes=notes,
    )
