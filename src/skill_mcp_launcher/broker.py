"""The privileged monitor: serves run requests from the server, one at a time.

A request's shape is checked (``checks``), the run is decided by the broker's own policy
(``policy``: the owner's grant from the launcher's environment, the declarations read by the
unprivileged helper in ``declared``), then run (``sandbox``) with a fresh egress proxy
holding that run's allowlist, then every process of the script uid and of the proxy uid is
swept. The reply carries the result in ``RunResult`` shape, or a refusal with a stable
reason; a refused request spawns nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import APPLIANCE, FIXED_PATH, Limits, appliance_sandbox, run_status
from skill_mcp.reasons import Refusal
from skill_mcp_launcher import checks, declared, isolation, policy, procs, proxy, sandbox

RUN_DIR = "/run/skill-mcp"
PROXY_DIR = f"{RUN_DIR}/proxy"
PROXY_START_S = 3.0


def log(event: str, **fields: Any) -> None:
    """One JSON object a line on stderr; stdout belongs to the server's protocol."""
    line = json.dumps({"ts": round(time.time(), 3), "component": "launcher", "event": event, **fields},
                      default=str)
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode("utf-8", "replace"))


@dataclass(slots=True)
class Broker:
    users: procs.Users
    reaper: procs.Reaper
    roots: tuple[str, ...]
    interpreters: dict[str, str]
    fence_ok: bool
    fence_detail: str
    grants: policy.Grants
    # The owner's environment as the launcher got it: the only source of the values handed to
    # scripts (the server is given none of the granted ones).
    environ: Mapping[str, str] = field(repr=False)
    parse_user: procs.Account
    # Whether this kernel can confine a run (``boot.boot_sandbox``): without it no script runs.
    sandbox_ok: bool = False
    sandbox_detail: str = "not probed"
    declarations: declared.Declarations | None = None
    declared_error: str | None = None
    limits: Limits = APPLIANCE
    runs: int = 0
    # True once a stop signal arrived: a run in progress is ended at once (SIGTERM, then SIGKILL).
    stopping: Callable[[], bool] = lambda: False
    # The server's pidfd: a run in progress ends at once when the server dies (nobody is
    # left to read its result, and the script must not run on until its own timeout).
    server_fd: int | None = None
    # The signal wakeup pipe (boot.serve): a stop signal wakes a run's capture loop.
    wake_fd: int | None = None

    def hello(self) -> dict[str, Any]:
        known = self.declarations
        return {"ok": True, "fence": self.fence_ok, "fenceDetail": self.fence_detail,
                "sandbox": self.sandbox_ok, "sandboxDetail": self.sandbox_detail,
                "interpreters": self.interpreters, "proxyPort": proxy.PROXY_PORT, "runs": self.runs,
                "grantFrom": self.grants.source,
                "declarations": {"skills": len(known.skills) if known else 0,
                                 "parsedAsUid": known.parsed_as if known else None, "error": self.declared_error},
                "limits": {"nproc": self.limits.nproc, "nofile": self.limits.nofile,
                           "fsize": self.limits.fsize, "addressSpace": self.limits.address_space}}

    def read_declarations(self) -> None:
        """Ask the unprivileged helper for the skills' declarations (at boot, and when one changed)."""
        try:
            self.declarations = declared.read(self.parse_user, self.roots, self.reaper)
            self.declared_error = None
            log("declarations", skills=len(self.declarations.skills), parsed_as_uid=self.declarations.parsed_as)
        except declared.DeclaredError as exc:
            # Fail closed: without declarations the broker allows nothing (every skill is unknown).
            self.declarations, self.declared_error = None, str(exc)
            log("declarations-failed", detail=str(exc))

    def _skills(self, name: str) -> Mapping[str, declared.DeclaredSkill]:
        known = self.declarations
        skill = known.skills.get(name) if known else None
        if skill is None or skill.changed():
            self.read_declarations()
            known = self.declarations
        return known.skills if known else {}

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        try:
            if op == "hello":
                return self.hello()
            if op == "run":
                return self.run(message.get("run"))
            raise SkillMcpError(Refusal.INVALID_ARGUMENTS, f"unknown op {op!r}")
        except SkillMcpError as exc:
            log("refused", reason=str(exc.reason), detail=exc.detail)
            return {"ok": False, "reason": str(exc.reason), "detail": exc.detail, "data": exc.data}
        except Exception as exc:
            # PID 1 must outlive any one request: an unexpected failure (a fork refused, a full
            # tmpfs) refuses that run and keeps serving.
            log("run-failed", error=repr(exc))
            return {"ok": False, "reason": str(Refusal.SPAWN_FAILED), "detail": f"the broker failed: {exc}",
                    "data": {}}

    def run(self, raw: Any) -> dict[str, Any]:
        if not self.fence_ok:
            raise SkillMcpError(Refusal.FENCE_UNAVAILABLE,
                                f"this appliance runs no scripts: {self.fence_detail}")
        if not self.sandbox_ok:
            raise SkillMcpError(Refusal.SANDBOX_UNAVAILABLE,
                                f"this appliance runs no scripts: the kernel cannot confine them ({self.sandbox_detail})")
        request = checks.parse_request(raw)
        job = policy.decide(request, skills=self._skills(request.skill), grants=self.grants,
                            interpreters=self.interpreters, roots=self.roots, environ=self.environ)
        notes: list[str] = []
        self.runs += 1
        scratch = isolation.make_scratch(self.users.script.gid)
        env = checks.run_env(job.env, scratch, proxy.PROXY_PORT)
        # The sandbox from the broker's own decision (the job), never from the server's word.
        rules = appliance_sandbox(skill_dir=job.cwd, scratch=scratch, interpreters=self.interpreters.values(),
                                  proxy_port=proxy.PROXY_PORT)
        try:
            proxy_pid = self._start_proxy(job.egress)
        except BaseException:
            isolation.remove_scratch(scratch)  # nothing ran in it
            raise
        try:
            outcome = sandbox.run(job, env, self.users.script, self.limits, self.reaper, scratch, self.stopping,
                                  self.server_fd, self.wake_fd, rules=rules)
        finally:
            self._stop_proxy(proxy_pid)
        log("run", skill_dir=job.cwd, argv0=job.argv[0], status=outcome.status, timed_out=outcome.timed_out,
            server_gone=outcome.server_gone, remaining=outcome.remaining, duration_ms=outcome.duration_ms, egress=list(job.egress))
        if outcome.spawn_error is not None:
            raise SkillMcpError(Refusal.SPAWN_FAILED, f"the script could not be started: {outcome.spawn_error}")
        return {"ok": True, "result": _result(outcome, notes), "sweep": {
            "remaining": outcome.remaining, "scratchRemoved": not outcome.scratch_left}}

    def _start_proxy(self, hosts: tuple[str, ...]) -> int:
        files = proxy.write_config(PROXY_DIR, hosts)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                procs.reset_signals()
                null = os.open("/dev/null", os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(2, 1)  # tinyproxy's messages go to the container's stderr, never stdout
                procs.close_fds_from(3)
                procs.drop_to(self.users.proxy)
                os.execve(proxy.TINYPROXY, proxy.argv(files), {"PATH": FIXED_PATH})  # noqa: S606 - an argv array, never a shell
            except BaseException as exc:
                os.write(2, f"proxy start failed: {exc}\n".encode())
            os._exit(127)
        self.reaper.watch(pid)
        deadline = time.monotonic() + PROXY_START_S
        while not proxy.listening():
            self.reaper.reap()
            if pid in self.reaper.statuses or time.monotonic() >= deadline:
                self._stop_proxy(pid)
                raise SkillMcpError(Refusal.FENCE_UNAVAILABLE, "the egress proxy did not start")
            time.sleep(0.002)
        return pid

    def _stop_proxy(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.reaper.wait(pid, 2.0)
        procs.sweep(self.users.proxy, self.reaper, timeout=2.0)


def _signal_name(status: int) -> str | None:
    if os.WIFSIGNALED(status):
        try:
            return signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            return str(os.WTERMSIG(status))
    return None


def _result(outcome: sandbox.Outcome, notes: list[str]) -> dict[str, Any]:
    status = outcome.status
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    sig = _signal_name(status) if status is not None else None
    state = run_status(code, sig, outcome.timed_out)
    if outcome.remaining:
        notes = [*notes, f"{outcome.remaining} processes of the script user survived the sweep"]
    return {
        "status": state, "exit_code": code, "signal": sig,
        "stdout": outcome.out.text(), "stderr": outcome.err.text(),
        "truncated_stdout": outcome.out.truncated, "truncated_stderr": outcome.err.truncated,
        "dropped_bytes": outcome.out.dropped + outcome.err.dropped,
        "duration_ms": outcome.duration_ms, "notes": notes,
    }


def fatal(message: str, code: int = 3) -> None:
    log("boot-failed", detail=message)
    sys.exit(code)
