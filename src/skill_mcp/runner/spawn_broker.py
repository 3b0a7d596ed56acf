"""The appliance spawner: sends a ``RunPlan`` to the container launcher's spawn-broker.

Selected when ``Settings.broker_fd`` is set (the launcher passes one end of a socketpair as
fd 3 and ``SKILL_MCP_BROKER_FD=3``). The broker is a privileged monitor: this side only asks
(skill, script, arguments, perhaps a shorter timeout, and the names its preview showed); the
broker decides the run itself from the owner's grant and the skill's declaration, hands the
granted values (which this process never holds), runs the script as a separate unprivileged
uid behind its egress proxy, and sweeps every process of that uid after the run; see
``skill_mcp_launcher`` and docs/deploy.md.

Framing is ``skill_mcp.brokerwire`` (stdlib only, shared with the launcher). One
request is in flight at a time. A reply that does not arrive within the plan's timeout plus
a margin marks the spawner broken: later runs are refused with ``spawn-failed`` rather than
risk reading a stale reply as a new one.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from skill_mcp import brokerwire, outputs
from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.runner.types import RunPlan, RunResult

# Beyond the plan's own timeout: the broker's wait for an earlier run's clean-up, TERM grace,
# drain, sweep, the wait for this run's clean-up and the proxy stop.
REPLY_MARGIN_S = 25.0
HELLO_TIMEOUT_S = 10.0


def plan_to_wire(plan: RunPlan) -> dict[str, Any]:
    """The request: what to run and what the user was shown - names only, never a value.

    The broker derives the interpreter's path, argv, cwd, every value and the limits itself;
    the interpreter, variable names and hosts sent here only let it refuse a run whose
    preview promised something its own policy does not allow.
    """
    return {
        "skill": plan.skill,
        "script": plan.script,
        "args": list(plan.argv[2:]),
        "timeout_s": plan.timeout_s,
        "interpreter": plan.interpreter,
        "env": sorted(plan.env),
        "egress": list(plan.egress),
    }


def result_from_wire(data: dict[str, Any]) -> RunResult:
    try:
        return RunResult(
            status=data["status"],
            exit_code=data["exit_code"],
            signal=data["signal"],
            stdout=str(data["stdout"]),
            stderr=str(data["stderr"]),
            truncated_stdout=bool(data["truncated_stdout"]),
            truncated_stderr=bool(data["truncated_stderr"]),
            dropped_bytes=int(data["dropped_bytes"]),
            duration_ms=int(data["duration_ms"]),
            notes=tuple(str(n) for n in data.get("notes", ())),
            # Re-checked here (caps, names, digests): the broker read them by descriptor as root.
            outputs=outputs.from_wire(data["outputs"]) if "outputs" in data else None,
            egress=_egress(data.get("egress")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SkillMcpError(Refusal.SPAWN_FAILED, f"the broker sent a malformed result: {exc}") from None


def _egress(raw: Any) -> dict[str, Any] | None:
    """The broker's egress report, kept to its shape: host-name lists and a count."""
    if not isinstance(raw, dict):
        return None
    hosts = {
        k: [str(h)[:253] for h in raw.get(k, ())][:64]
        for k in ("allowed", "refused")
        if isinstance(raw.get(k, ()), list)
    }
    count = raw.get("directDropped")
    out: dict[str, Any] = {
        "fenced": True,
        "allowed": hosts.get("allowed", []),
        "refused": hosts.get("refused", []),
        "directDropped": count if isinstance(count, int) and not isinstance(count, bool) else None,
    }
    if raw.get("directDroppedAtLeast") is True:
        out["directDroppedAtLeast"] = True
    return out


def _refusal(reason: Any) -> Refusal:
    try:
        return Refusal(reason)
    except ValueError:
        return Refusal.SPAWN_FAILED


@dataclass(slots=True)
class BrokerSpawner:
    sock: socket.socket
    name: str = "broker"
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _next_id: int = 0
    _broken: str | None = None

    @classmethod
    def from_fd(cls, fd: int) -> BrokerSpawner:
        return cls(sock=socket.socket(fileno=fd))

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Blocking: send one request and wait (bounded) for its reply."""
        with self._lock:
            if self._broken is not None:
                raise SkillMcpError(Refusal.SPAWN_FAILED, f"the spawn-broker is unusable: {self._broken}")
            self._next_id += 1
            message = {"v": brokerwire.VERSION, "id": self._next_id, **message}
            try:
                brokerwire.send(self.sock, message)
                reply = brokerwire.recv(
                    self.sock, first_byte_timeout=timeout, frame_timeout=timeout, max_frame=brokerwire.MAX_REPLY_FRAME
                )
            except (OSError, brokerwire.ProtocolError) as exc:
                self._broken = str(exc)
                raise SkillMcpError(Refusal.SPAWN_FAILED, f"the spawn-broker did not answer: {exc}") from None
            if reply is None or reply.get("id") != message["id"]:
                self._broken = "the broker closed the connection" if reply is None else "reply out of order"
                raise SkillMcpError(Refusal.SPAWN_FAILED, f"the spawn-broker is unusable: {self._broken}")
            return reply

    def hello(self) -> dict[str, Any]:
        """The broker's boot facts: ``fence`` (bool), ``fenceDetail``, ``interpreters``, limits."""
        return self.request({"op": "hello"}, HELLO_TIMEOUT_S)

    async def run(self, plan: RunPlan) -> RunResult:
        wire = {"op": "run", "run": plan_to_wire(plan)}
        reply = await anyio.to_thread.run_sync(self.request, wire, plan.timeout_s + REPLY_MARGIN_S)
        if not reply.get("ok"):
            data = reply.get("data")
            raise SkillMcpError(
                _refusal(reply.get("reason")),
                str(reply.get("detail", "refused by the broker")),
                data if isinstance(data, dict) else None,
            )
        result = reply.get("result")
        if not isinstance(result, dict):
            raise SkillMcpError(Refusal.SPAWN_FAILED, "the broker sent no result")
        return result_from_wire(result)
