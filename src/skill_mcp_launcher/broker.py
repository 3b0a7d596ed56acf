"""The privileged monitor: serves run requests from the server, one at a time.

A request's shape is checked (``checks``), the run is decided by the broker's own policy
(``policy``: the owner's grant from the launcher's environment, the declarations read by the
unprivileged helper in ``parse_helper``), then run (``sandbox``) with a fresh egress proxy
holding that run's allowlist, then every process of the script uid and of the proxy uid is
swept. The reply carries the result in ``RunResult`` shape, or a refusal with a stable
reason; a refused request spawns nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skill_mcp import declwire, outputs
from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import APPLIANCE, FIXED_PATH, Limits, run_status
from skill_mcp.reasons import Refusal
from skill_mcp.sandbox_rules import appliance_sandbox
from skill_mcp_launcher import checks, egress_report, isolation, parse_helper, policy, procs, proxy, sandbox

RUN_DIR = "/run/skill-mcp"
PROXY_DIR = f"{RUN_DIR}/proxy"
PROXY_START_S = 3.0
# Before a run, how long a clean-up still running (or retried) is waited for before the run is
# refused with cleanup-pending; the server's reply margin (spawn_broker.REPLY_MARGIN_S) covers it.
CLEANUP_WAIT_S = 1.0


def log(event: str, **fields: Any) -> None:
    """One JSON object a line on stderr; stdout belongs to the server's protocol."""
    line = json.dumps({"ts": round(time.time(), 3), "component": "launcher", "event": event, **fields}, default=str)
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
    declarations: declwire.Declarations | None = None
    # Counts a run's direct connections the ruleset dropped (bound at boot; egress_report).
    drops: egress_report.DropLog = field(default_factory=lambda: egress_report.DropLog(None))
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
    # What the script uid's runs left, and its removal, which may outlast a request: no run
    # starts until it is done (``procs.Cleanup``). Made at boot, for the boot's own sweep.
    cleanup: procs.Cleanup | None = None

    def __post_init__(self) -> None:
        if self.cleanup is None:
            self.cleanup = procs.Cleanup(self.users.script)

    @property
    def script_cleanup(self) -> procs.Cleanup:
        assert self.cleanup is not None
        return self.cleanup

    def hello(self) -> dict[str, Any]:
        known = self.declarations
        return {
            "ok": True,
            "fence": self.fence_ok,
            "fenceDetail": self.fence_detail,
            "sandbox": self.sandbox_ok,
            "sandboxDetail": self.sandbox_detail,
            "interpreters": self.interpreters,
            "proxyPort": proxy.PROXY_PORT,
            "runs": self.runs,
            "grantFrom": self.grants.source,
            "cleanup": self.script_cleanup.state,
            "declarations": {
                "skills": len(known.skills) if known else 0,
                "parsedAsUid": known.parsed_as if known else None,
                "error": self.declared_error,
            },
            "limits": {
                "nproc": self.limits.nproc,
                "nofile": self.limits.nofile,
                "fsize": self.limits.fsize,
                "addressSpace": self.limits.address_space,
            },
        }

    def read_declarations(self) -> None:
        """Ask the unprivileged helper for the skills' declarations (at boot, and when one changed)."""
        try:
            self.declarations = parse_helper.read(self.parse_user, self.roots, self.reaper)
            self.declared_error = None
            log(
                "declarations",
                skills=len(self.declarations.skills),
                parsed_as_uid=self.declarations.parsed_as,
                dropped={d.name: d.detail for d in self.declarations.dropped.values()},
            )
        except declwire.DeclaredError as exc:
            # Fail closed: without declarations the broker allows nothing (every skill is unknown).
            self.declarations, self.declared_error = None, str(exc)
            log("declarations-failed", detail=str(exc))

    def _skills(self, name: str) -> Mapping[str, declwire.DeclaredSkill]:
        """The declarations, read again when ``name`` is unknown or changed; a dropped ``name`` is refused.

        A skill the helper reported past the bounds (or out of shape) is refused alone, the way
        the server refuses a skill whose declaration is invalid: none of its scripts is declared.
        """
        known = self.declarations
        skill = known.skills.get(name) if known else None
        gone = known.dropped.get(name) if known else None
        if (skill is None and (gone is None or gone.changed())) or (skill is not None and skill.changed()):
            self.read_declarations()
            known = self.declarations
            gone = known.dropped.get(name) if known else None
        if gone is not None:
            raise SkillMcpError(
                Refusal.UNDECLARED_SCRIPT,
                f"the declaration of {name!r} is out of the broker's bounds, so none of its "
                f"scripts is declared: {gone.detail}",
                {"skill": name, "declared": []},
            )
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
            return {"ok": False, "reason": str(Refusal.SPAWN_FAILED), "detail": f"the broker failed: {exc}", "data": {}}

    def run(self, raw: Any) -> dict[str, Any]:
        if not self.fence_ok:
            raise SkillMcpError(Refusal.FENCE_UNAVAILABLE, f"this appliance runs no scripts: {self.fence_detail}")
        if not self.sandbox_ok:
            raise SkillMcpError(
                Refusal.SANDBOX_UNAVAILABLE,
                f"this appliance runs no scripts: the kernel cannot confine them ({self.sandbox_detail})",
            )
        request = checks.parse_request(raw)
        job = policy.decide(
            request,
            skills=self._skills(request.skill),
            grants=self.grants,
            interpreters=self.interpreters,
            roots=self.roots,
            environ=self.environ,
        )
        notes: list[str] = []
        self._ensure_clean()
        self.runs += 1
        scratch = isolation.make_scratch(self.users.script.gid)
        out_dir = isolation.make_output_dir(scratch, self.users.script.gid)
        env = policy.broker_env(job.env, scratch, proxy.PROXY_PORT)
        # The sandbox from the broker's own decision (the job), never from the server's word.
        rules = appliance_sandbox(
            skill_dir=job.cwd, scratch=scratch, interpreters=self.interpreters.values(), proxy_port=proxy.PROXY_PORT
        )
        self.drops.take()  # whatever arrived between runs is no run's
        proxy_log = egress_report.ProxyLog()
        try:
            proxy_pid, log_fd = self._start_proxy(job.egress)
        except BaseException:
            isolation.remove_scratch(scratch)  # nothing ran in it
            raise
        try:
            outcome = sandbox.run(
                job,
                env,
                self.users.script,
                self.limits,
                self.reaper,
                scratch,
                self.stopping,
                self.server_fd,
                self.wake_fd,
                cleanup=self.script_cleanup,
                outputs_dir=out_dir,
                side=(log_fd, proxy_log.feed),
                rules=rules,
            )
        finally:
            self._stop_proxy(proxy_pid)
            egress_report.read_available(log_fd, proxy_log)  # what it wrote before it was stopped
            os.close(log_fd)
        log(
            "run",
            skill_dir=job.cwd,
            argv0=job.argv[0],
            status=outcome.status,
            timed_out=outcome.timed_out,
            server_gone=outcome.server_gone,
            remaining=outcome.remaining,
            cleanup=outcome.cleanup,
            duration_ms=outcome.duration_ms,
            egress=list(job.egress),
        )
        if outcome.spawn_error is not None:
            raise SkillMcpError(Refusal.SPAWN_FAILED, f"the script could not be started: {outcome.spawn_error}")
        result = _result(outcome, notes)
        result["egress"] = egress_report.report(proxy_log, self.drops.take())
        declared_skill = (self.declarations.skills if self.declarations else {}).get(request.skill)
        result["notes"] = [
            *result["notes"],
            *egress_report.grant_notes(
                request.skill, request.script, proxy_log.refused, declared_skill.egress if declared_skill else ()
            ),
        ]
        if outcome.outputs is not None:
            result["outputs"] = outputs.to_wire(outcome.outputs)
        return {
            "ok": True,
            "result": result,
            "sweep": {
                "remaining": outcome.remaining,
                "scratchRemoved": not outcome.scratch_left,
                **self.script_cleanup.report(),
            },
        }

    def _ensure_clean(self) -> None:
        """No run starts beside what an earlier one left: continue or retry its clean-up first."""
        cleanup = self.script_cleanup
        state = cleanup.ensure(self.reaper, CLEANUP_WAIT_S)
        if state != "done":
            log(
                "cleanup-pending",
                state=state,
                detail=cleanup.failure,
                scratch_left=len(cleanup.scratch),
                remaining=cleanup.remaining,
            )
            raise SkillMcpError(
                Refusal.CLEANUP_PENDING,
                f"what an earlier run left is not removed yet ({cleanup.failure}); ask again",
                {"sweep": {"remaining": cleanup.remaining, "scratchRemoved": not cleanup.scratch, **cleanup.report()}},
            )

    def _start_proxy(self, hosts: tuple[str, ...]) -> tuple[int, int]:
        """Start this run's tinyproxy and prove the listener scripts reach is its own socket; return
        its pid and the read end of its log (its stdout: ``egress_report.ProxyLog`` keeps the host
        names it allowed and refused, and nothing else of it is read or logged).

        Tinyproxy cannot take a listening socket from its parent, so the launcher cannot own
        the socket; it verifies instead (``_verify_proxy``), and a port that another uid bound
        first refuses the run (``fence-unavailable``) - the script never starts, so none of its
        bytes can reach the squatter. Between runs, and if tinyproxy died mid-run, the ruleset
        drops every loopback packet from the proxy's port that a proxy-uid socket did not send,
        so a listener of any other uid can never complete a handshake with a script.
        """
        files = proxy.write_config(PROXY_DIR, hosts)
        log_r, log_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                procs.reset_signals()
                null = os.open("/dev/null", os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(log_w, 1)  # its log lines carry URLs: to the launcher only, never the container's log
                procs.close_fds_from(3)
                procs.drop_to(self.users.proxy)
                os.execve(proxy.TINYPROXY, proxy.argv(files), {"PATH": FIXED_PATH})  # noqa: S606 - an argv array, never a shell
            except BaseException as exc:
                os.write(2, f"proxy start failed: {exc}\n".encode())
            os._exit(127)
        self.reaper.watch(pid)
        os.close(log_w)
        os.set_blocking(log_r, False)
        try:
            self._verify_proxy(pid)
        except BaseException:
            self._stop_proxy(pid)
            os.close(log_r)
            raise
        return pid, log_r

    def _verify_proxy(self, pid: int) -> None:
        deadline = time.monotonic() + PROXY_START_S
        while True:
            verdict, detail = proxy.judge(proxy.read_listeners(), self.users.proxy.uid)
            if verdict is proxy.Verdict.FOREIGN:
                log("proxy-port-taken", detail=detail)
                raise SkillMcpError(
                    Refusal.FENCE_UNAVAILABLE, f"the egress proxy's port is not the proxy's: {detail}; nothing was run"
                )
            if verdict is proxy.Verdict.OURS:
                break
            self.reaper.reap()
            if pid in self.reaper.statuses or time.monotonic() >= deadline:
                raise SkillMcpError(Refusal.FENCE_UNAVAILABLE, "the egress proxy did not start")
            time.sleep(0.002)
        # The uid says a proxy-uid process made the socket; the inode says this tinyproxy holds it.
        inodes = self._proxy_inodes(pid)
        verdict, detail = proxy.judge(proxy.read_listeners(), self.users.proxy.uid, inodes)
        if verdict is not proxy.Verdict.OURS:
            log("proxy-port-taken", detail=detail)
            raise SkillMcpError(
                Refusal.FENCE_UNAVAILABLE, f"the egress proxy's port is not the proxy's: {detail}; nothing was run"
            )

    def _proxy_inodes(self, pid: int) -> frozenset[int]:
        """Tinyproxy's socket inodes, read by a child of the proxy uid.

        The launcher keeps no CAP_SYS_PTRACE, so root here cannot read another uid's
        ``/proc/<pid>/fd``; a child that drops to the proxy uid can (same uid, and tinyproxy is
        dumpable), and reports the inodes over a pipe. The child execs nothing and never reads
        what another process wrote; dropping uid made it non-dumpable.
        """
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        child = os.fork()
        if child == 0:  # pragma: no cover - child
            code = 1
            try:
                procs.reset_signals()
                os.dup2(out_w, 1)
                procs.close_fds_from(3)
                procs.drop_to(self.users.proxy)
                os.write(1, " ".join(map(str, proxy.socket_inodes(f"/proc/{pid}/fd"))).encode("ascii"))
                code = 0
            finally:
                os._exit(code)
        self.reaper.watch(child)
        os.close(out_w)
        try:
            data = _read_capped(out_r, 1 << 20, PROXY_START_S)
        finally:
            os.close(out_r)
            status = self.reaper.wait(child, 2.0)
        if status is None or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            raise SkillMcpError(Refusal.FENCE_UNAVAILABLE, "the egress proxy's sockets could not be read")
        try:
            return frozenset(int(n) for n in data.split())
        except ValueError:
            raise SkillMcpError(Refusal.FENCE_UNAVAILABLE, "the egress proxy's sockets could not be read") from None

    def _stop_proxy(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.reaper.wait(pid, 2.0)
        procs.sweep(self.users.proxy, self.reaper, timeout=2.0)


def _read_capped(fd: int, cap: int, timeout: float) -> bytes:
    """Read ``fd`` to end of file, at most ``cap`` bytes, within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    buf = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while len(buf) <= cap:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise SkillMcpError(Refusal.FENCE_UNAVAILABLE, "the egress proxy's sockets could not be read in time")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return bytes(buf)
            buf += chunk
    raise SkillMcpError(Refusal.FENCE_UNAVAILABLE, "the egress proxy's sockets could not be read")


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
        "status": state,
        "exit_code": code,
        "signal": sig,
        "stdout": outcome.out.text(),
        "stderr": outcome.err.text(),
        "truncated_stdout": outcome.out.truncated,
        "truncated_stderr": outcome.err.truncated,
        "dropped_bytes": outcome.out.dropped + outcome.err.dropped,
        "duration_ms": outcome.duration_ms,
        "notes": notes,
    }


def fatal(message: str, code: int = 3) -> None:
    log("boot-failed", detail=message)
    sys.exit(code)
