"""``DeclaredScripts``: the ``ScriptStates`` of a server that has no runner plugged in.

Kept out of ``surfaces.state`` because a server that serves (``server.plugins`` always plugs
the runner in) never needs it, and its record class costs start-up time before the first answer:
``surfaces.app.assemble`` imports it only when no ``script_states`` is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skill_mcp.config import Settings
from skill_mcp.reasons import ProblemReason

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Problem, Skill


@dataclass(frozen=True, slots=True)
class DeclaredScripts:
    """The ``ScriptStates`` used until a runner is plugged in: scripts are declared, none runs."""

    settings: Settings

    def grant(self) -> Mapping[str, Any]:
        return {
            "grantFrom": self.settings.grant_source,
            "grantNote": "script execution is not available in this server build",
        }

    def scripts(self, skill: Skill) -> Sequence[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        missing = set(skill.missing_scripts)
        for row in skill.declaration.run if skill.declaration else ():
            entry: dict[str, Any] = {
                "script": row.script,
                "interpreter": row.interpreter,
                "state": "missing" if row.script in missing else "declared",
            }
            if row.script in missing:
                entry["reason"] = str(ProblemReason.DECLARED_SCRIPT_MISSING)
            if row.description:
                entry["description"] = row.description
            out.append(entry)
        return out

    def problems(self) -> Sequence[Problem]:
        return ()

    def skill_extras(self, skill: Skill) -> Mapping[str, Any]:
        return {}
