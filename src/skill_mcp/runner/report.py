"""What ``skill_list`` says about scripts: a pure function of the catalog and the fence.

Per declared script one state:

- ``runnable``: declared, interpreter present, granted, the file is there;
- ``not-granted``: declared but no grant covers it (hosted without ``MCP_SKILL_RUN``, or no row);
- ``interpreter-unavailable``: its interpreter is not in this deployment's set (the set is named);
- ``missing``: declared but not in the bundle (the catalog reports ``declared-script-missing``);
- ``blocked``: everything above holds but this server runs no script at all (``environ-unscrubbed``
  on a hosted server, or root without a user to drop to); ``detail`` says which.

Top level: ``grantFrom`` (``MCP_SKILL_RUN`` | ``declaration`` | ``hosted-default``), ``grantNote``
when hosted, the interpreter set, and ``problems`` (grant rows that matched nothing, loader
variables that are never handed, ``environ-unscrubbed``, and ``interpreter-unavailable`` for a
script whose interpreter is in the closed set but not installed here; a name outside the set is
the catalog's problem already, reported wherever the skill is read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skill_mcp.limits import KNOWN as INTERPRETER_NAMES
from skill_mcp.models import Catalog, Problem, Skill
from skill_mcp.reasons import Level, ProblemReason, Refusal
from skill_mcp.runner.grants import GrantSet, declared_forbidden
from skill_mcp.runner.interpreters import Interpreters


@dataclass(frozen=True, slots=True)
class ScriptState:
    script: str
    interpreter: str
    state: str
    detail: str = ""
    env: tuple[str, ...] = ()  # granted variable names
    timeout: int = 60
    reason: str = ""  # the stable reason a run of it would be refused with; "" when runnable

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "script": self.script,
            "interpreter": self.interpreter,
            "state": self.state,
            "env": list(self.env),
            "timeoutSeconds": self.timeout,
        }
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why this server runs no script at all: a stable reason and the sentence for a person."""

    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class FenceReport:
    grant_from: str
    grant_note: str | None
    interpreters: dict[str, str]
    scripts: dict[str, tuple[ScriptState, ...]]  # skill name -> its declared scripts
    problems: tuple[Problem, ...]

    def skill_dict(self, name: str) -> dict[str, Any]:
        """The per-skill fields: ``scripts``, ``unavailableScripts``, ``ungrantedScripts``."""
        states = self.scripts.get(name, ())
        return {
            "scripts": [s.to_dict() for s in states],
            "unavailableScripts": [
                {"script": s.script, "interpreter": s.interpreter, "detail": s.detail}
                for s in states
                if s.state == "interpreter-unavailable"
            ],
            "ungrantedScripts": [s.script for s in states if s.state == "not-granted"],
        }

    def top_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"grantFrom": self.grant_from, "interpreters": dict(self.interpreters)}
        if self.grant_note:
            out["grantNote"] = self.grant_note
        return out


def _state(
    skill: Skill, script: str, interpreter: str, grants: GrantSet, interpreters: Interpreters, blocked: Blocked | None
) -> tuple[str, str, str]:
    """(state, reason, detail) of one declared script."""
    if script in skill.missing_scripts:
        return "missing", ProblemReason.DECLARED_SCRIPT_MISSING, "declared but not in the bundle"
    if interpreter not in interpreters.paths:
        return (
            "interpreter-unavailable",
            Refusal.INTERPRETER_UNAVAILABLE,
            interpreters.unavailable_detail(interpreter),
        )
    if grants.get(skill.name, script) is None:
        return "not-granted", Refusal.NOT_GRANTED, grants.note or "no MCP_SKILL_RUN row grants this script"
    if blocked:
        return "blocked", blocked.reason, f"{blocked.reason}: {blocked.detail}"
    return "runnable", "", ""


def fence_report(
    catalog: Catalog,
    grants: GrantSet,
    interpreters: Interpreters,
    *,
    blocked: Blocked | None = None,
    unscrubbed: str | None = None,
) -> FenceReport:
    """Pure: the same inputs always give the same report. ``unscrubbed`` adds that problem."""
    scripts: dict[str, tuple[ScriptState, ...]] = {}
    problems: list[Problem] = list(grants.problems)
    for skill in catalog.skills.values():
        if skill.declaration is None or not skill.declaration.run:
            continue
        rows = []
        for decl in skill.declaration.run:
            state, reason, detail = _state(skill, decl.script, decl.interpreter, grants, interpreters, blocked)
            grant = grants.get(skill.name, decl.script)
            rows.append(
                ScriptState(
                    decl.script, decl.interpreter, state, detail, grant.env if grant else (), decl.timeout, str(reason)
                )
            )
            if state == "interpreter-unavailable" and decl.interpreter in INTERPRETER_NAMES:
                problems.append(
                    Problem(
                        f"{skill.found_at}/{decl.script}",
                        ProblemReason.INTERPRETER_UNAVAILABLE,
                        f"{decl.script}: {detail}",
                        Level.ERROR,
                        skill.name,
                    )
                )
        scripts[skill.name] = tuple(rows)
        problems.extend(declared_forbidden(skill))
    if unscrubbed:
        problems.append(
            Problem(
                path="<server>",
                reason=ProblemReason.ENVIRON_UNSCRUBBED,
                detail=unscrubbed,
                level=Level.ERROR if blocked else Level.WARNING,
            )
        )
    return FenceReport(grants.grant_from, grants.note, dict(interpreters.paths), scripts, tuple(problems))
