"""The contract between the runner and a spawner (local or broker).

The runner turns a declared script plus a grant into a ``RunPlan``; a ``Spawner`` executes
the plan and returns a ``RunResult``. Both spawners (``spawn_local`` for standalone, the
broker client for the appliance) implement ``Spawner``. The broker client sends only what
to run and the names the preview showed; the broker decides the rest on its own side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from skill_mcp.limits import CAPTURE_LIMIT, DEFAULT_TIMEOUT_S, DRAIN_S, MAX_TIMEOUT_S, TERM_GRACE_S, RunStatus

# The limits and timeouts live in ``skill_mcp.limits``, shared with the appliance's broker.
from skill_mcp.outputs import Collected

__all__ = [
    "CAPTURE_LIMIT",
    "DEFAULT_TIMEOUT_S",
    "DRAIN_S",
    "MAX_TIMEOUT_S",
    "TERM_GRACE_S",
    "TMPDIR_PLACEHOLDER",
    "OutputTap",
    "RunPlan",
    "RunResult",
    "RunStatus",
    "Spawner",
]

# Called with ("stdout" | "stderr", bytes) as a running script writes, before the capture keeps
# (or drops) them: how ``skill-mcp call`` shows a run's output as it comes. The result still
# carries the captured output, bounded as ever; a tap never changes what a client is answered.
OutputTap = Callable[[str, bytes], None]

# ``RunPlan.env["TMPDIR"]`` carries this value; every spawner replaces it with a private
# directory it creates for the run and removes afterwards.
TMPDIR_PLACEHOLDER = ""


@dataclass(frozen=True, slots=True)
class RunPlan:
    skill: str
    script: str  # skill-relative path, as declared
    interpreter: str  # "node" | "python" | "bash"
    interpreter_path: str  # absolute, resolved once at boot
    argv: tuple[str, ...]  # (interpreter_path, absolute script path, *args) - never a shell string
    cwd: str  # the skill's real directory
    env: Mapping[str, str] = field(repr=False)  # the complete child environment; values never logged
    timeout_s: float = DEFAULT_TIMEOUT_S
    egress: tuple[str, ...] = ()  # hosts declared by the skill and accepted by the owner
    script_digest: str = ""  # "sha256:<hex>" of the script as previewed

    @property
    def env_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.env))


@dataclass(frozen=True, slots=True)
class RunResult:
    status: RunStatus  # ok: exit 0; error: non-zero exit; timeout: deadline hit; killed: by a signal
    exit_code: int | None
    signal: str | None
    stdout: str
    stderr: str
    truncated_stdout: bool
    truncated_stderr: bool
    dropped_bytes: int
    duration_ms: int
    notes: tuple[str, ...] = ()
    # The files the script left in its output directory (``skill_mcp.outputs``); None when the
    # spawner collected none (a run that never started).
    outputs: Collected | None = field(default=None, repr=False, compare=False)
    # What the appliance's fence refused during the run: {allowed, refused, directDropped}, names
    # and counts only; None standalone, which has no fence.
    egress: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exitCode": self.exit_code,
            "signal": self.signal,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "truncated": {"stdout": self.truncated_stdout, "stderr": self.truncated_stderr},
            "droppedBytes": self.dropped_bytes,
            "durationMs": self.duration_ms,
            **({"notes": list(self.notes)} if self.notes else {}),
            **({"egress": dict(self.egress)} if self.egress is not None else {}),
        }


class Spawner(Protocol):
    """Executes a plan. Must always return within ``plan.timeout_s`` plus a small bound."""

    name: str  # "local" or "broker"

    async def run(self, plan: RunPlan) -> RunResult: ...
