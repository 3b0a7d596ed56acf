"""Grants: which declared scripts may run, and with which variables and hosts.

``MCP_SKILL_RUN`` is a JSON array of rows::

    [{"skill": "weather", "script": "scripts/forecast.js",
      "env": ["WEATHER_API_KEY"], "egress": ["api.weather.example"]}]

``env`` and ``egress`` are optional (absent means none). What a row grants is the row
intersected with the skill's declaration: a row naming an unknown skill, an undeclared script,
a variable the script did not ask for or a host the skill did not declare grants nothing for
that part and is reported as ``grant-unmatched``. A value that is not such an array grants
nothing at all and is reported as ``grant-invalid`` (fail closed). No spelling of a row makes
something runnable that a skill did not declare.

Without ``MCP_SKILL_RUN``: a hosted process (``grantrules.is_hosted``: any of its
``HOSTED_MARKERS``) grants nothing; a standalone one lets every declaration stand, variables
included. Which of the three applies is ``grantrules.grant_source``, the broker's rule too.

Loader and interpreter-startup variables (``LD_*``, ``PYTHON*``, ``NODE_OPTIONS``,
``BASH_ENV`` ...) are never handed, whoever declared or granted them: each one turns "run this
declared file" into "run some other code first".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from skill_mcp import grantrules
from skill_mcp.grantrules import FIXED_ENV, HOST_ENV, GrantRow, forbidden_variable
from skill_mcp.models import Catalog, Problem, ScriptDecl, Skill
from skill_mcp.reasons import Level, ProblemReason

GrantFrom = grantrules.GrantSource  # one vocabulary for both sides

# The fixed allowlist, the forbidden list and the row syntax live in ``skill_mcp.grantrules``,
# which the appliance's broker applies too: one list for both sides.
__all__ = [
    "FIXED_ENV",
    "HOST_ENV",
    "GrantRow",
    "GrantSet",
    "ScriptGrant",
    "build_grants",
    "declared_forbidden",
    "forbidden_variable",
    "rows_and_problems",
]


@dataclass(frozen=True, slots=True)
class ScriptGrant:
    """What one declared script is allowed: variable names and hosts, already intersected."""

    skill: str
    script: str
    env: tuple[str, ...]
    egress: tuple[str, ...]
    source: GrantFrom


@dataclass(frozen=True, slots=True)
class GrantSet:
    grant_from: GrantFrom
    hosted: bool
    grants: Mapping[tuple[str, str], ScriptGrant] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    note: str | None = None

    def get(self, skill: str, script: str) -> ScriptGrant | None:
        return self.grants.get((skill, script))


def _problem(reason: ProblemReason, detail: str, skill: str | None = None) -> Problem:
    # A malformed value is an error (nothing granted); a row that partly matches is a warning.
    level = Level.ERROR if reason == ProblemReason.GRANT_INVALID else Level.WARNING
    return Problem(path="MCP_SKILL_RUN", reason=reason, detail=detail, level=level, skill=skill)


def rows_and_problems(raw: str) -> tuple[tuple[GrantRow, ...], tuple[Problem, ...]]:
    """``MCP_SKILL_RUN`` parsed by ``grantrules.parse_rows``, each error worded as a catalog
    ``Problem``: a malformed value yields no rows and one ``grant-invalid``."""
    rows, errors, _invalid = grantrules.parse_rows(raw)
    return rows, tuple(_problem(ProblemReason.GRANT_INVALID, e) for e in errors)


def _row_problems(row: GrantRow, skill: Skill | None, refused: tuple[grantrules.Refused, ...] | None) -> list[Problem]:
    """The problems of one row: no such skill, an undeclared script (``refused`` is None), or each refused name."""
    where = f"row {row.index} ({row.skill} / {row.script})"
    if skill is None:
        return [_problem(ProblemReason.GRANT_UNMATCHED, f"{where}: no such skill is served")]
    if refused is None:
        return [
            _problem(
                ProblemReason.GRANT_UNMATCHED,
                f"{where}: the skill does not declare this script; it grants nothing",
                skill.name,
            )
        ]
    out = []
    for r in refused:
        if r.kind == "unasked":
            out.append(
                _problem(
                    ProblemReason.GRANT_UNMATCHED,
                    f"{where}: the script does not ask for {r.name}; not granted",
                    skill.name,
                )
            )
        elif r.kind == "forbidden":
            out.append(_problem(ProblemReason.ENV_FORBIDDEN, f"{where}: {r.name} is {r.why}; never handed", skill.name))
        else:
            out.append(
                _problem(
                    ProblemReason.GRANT_UNMATCHED,
                    f"{where}: the skill does not declare host {r.name}; not granted",
                    skill.name,
                )
            )
    return out


def _row_grants(
    rows: Iterable[GrantRow], skills: Mapping[str, Skill]
) -> tuple[dict[tuple[str, str], ScriptGrant], list[Problem]]:
    """Each row checked against the declarations (problems in row order); each script granted the
    union of its rows, intersected with its declaration by ``grantrules.intersect``."""
    matched: dict[tuple[str, str], tuple[Skill, ScriptDecl, list[GrantRow]]] = {}
    problems: list[Problem] = []
    for row in rows:
        skill = skills.get(row.skill)
        decl = skill.declaration.script(row.script) if skill is not None and skill.declaration else None
        if skill is None or decl is None:
            problems += _row_problems(row, skill, None)
            continue
        hosts = skill.declaration.egress if skill.declaration else ()
        problems += _row_problems(row, skill, grantrules.intersect([row], decl.env, hosts).refused)
        matched.setdefault((skill.name, row.script), (skill, decl, []))[2].append(row)
    out: dict[tuple[str, str], ScriptGrant] = {}
    for (name, script), (skill, decl, script_rows) in matched.items():
        hosts = skill.declaration.egress if skill.declaration else ()
        granted = grantrules.intersect(script_rows, decl.env, hosts)
        out[(name, script)] = ScriptGrant(name, script, granted.env, granted.egress, "MCP_SKILL_RUN")
    return out, problems


def _declaration_grants(skills: Iterable[Skill]) -> dict[tuple[str, str], ScriptGrant]:
    out: dict[tuple[str, str], ScriptGrant] = {}
    for skill in skills:
        if skill.declaration is None:
            continue
        for decl in skill.declaration.run:
            granted = grantrules.by_declaration(decl.env, skill.declaration.egress)
            out[(skill.name, decl.script)] = ScriptGrant(
                skill.name, decl.script, granted.env, granted.egress, "declaration"
            )
    return out


def build_grants(catalog: Catalog, raw: str | None, *, hosted: bool) -> GrantSet:
    """Intersect ``MCP_SKILL_RUN`` (or the default for this mode) with the catalog's declarations."""
    source = grantrules.grant_source(raw, hosted=hosted)
    if raw is not None:
        rows, problems = rows_and_problems(raw)
        acc, found = _row_grants(rows, catalog.skills)
        note = "grants come from MCP_SKILL_RUN only; a declared script without a row does not run" if hosted else None
        return GrantSet(source, hosted, acc, (*problems, *found), note)
    if source == "hosted-default":
        return GrantSet(
            source,
            True,
            {},
            (),
            (
                "hosted (a host marker such as MCP_DATA_DIR is set) and MCP_SKILL_RUN is absent: nothing is "
                "granted and no script runs; instructions and files are still served. Set MCP_SKILL_RUN to a "
                'JSON array of {"skill", "script", "env", "egress"} rows to grant declared scripts.'
            ),
        )
    return GrantSet(source, False, _declaration_grants(catalog.skills.values()))


def declared_forbidden(skill: Skill) -> list[Problem]:
    """Variables a skill's scripts ask for that the fence will never hand (reported, not fatal)."""
    out: list[Problem] = []
    if skill.declaration is None:
        return out
    for decl in skill.declaration.run:
        for name in decl.env:
            why = forbidden_variable(name)
            if why is not None:
                out.append(
                    Problem(
                        path=skill.found_at,
                        reason=ProblemReason.ENV_FORBIDDEN,
                        detail=f"{decl.script} asks for {name}, which is {why}; it is never handed",
                        level=Level.WARNING,
                        skill=skill.name,
                    )
                )
    return out
