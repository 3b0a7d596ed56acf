"""The broker's own policy: what a run may be, decided from the owner's grant and the declaration.

Like OpenSSH's monitor, the broker recomputes the policy rather than take it from the less
privileged side. Its inputs are its own:

* the owner's ``MCP_SKILL_RUN``, read from the launcher's environment at boot (rows parsed by
  ``skill_mcp.grantrules``, the server's own syntax), and where grants come from by the server's
  rule (``grantrules.grant_source``);
* the skills' declarations, read by the unprivileged helper (``parse_helper``, records of ``skill_mcp.declwire``);
* the interpreter paths it resolved itself, and the skills roots it was given.

``decide`` turns a ``checks.Request`` into a ``sandbox.Job`` or refuses with a named reason:
an unknown skill, an undeclared or ungranted script, an interpreter other than the declared
one, a path that leaves the skill, a variable that is a loader variable or outside the fixed
allowlist and the grant, a host outside declared-and-granted, a timeout above the declared
one. What the request names narrows the run (the user approved those names); it never widens.
The values of variables come from the launcher's environment only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from skill_mcp.declwire import DeclaredScript, DeclaredSkill
from skill_mcp.errors import SkillMcpError
from skill_mcp.grantrules import (
    FIXED_ENV,
    HOST_ENV,
    Granted,
    GrantRow,
    GrantSource,
    by_declaration,
    exec_env,
    forbidden_variable,
    grant_source,
    intersect,
    is_hosted,
    is_loader_variable,
    owner_values,
    parse_rows,
)
from skill_mcp.limits import FIXED_PATH, clamp_timeout
from skill_mcp.paths import is_inside, resolve_inside
from skill_mcp.reasons import Refusal
from skill_mcp_launcher.checks import Request
from skill_mcp_launcher.egress import allowed_hosts
from skill_mcp_launcher.sandbox import Job


@dataclass(frozen=True, slots=True)
class Grants:
    """The owner's grant as the broker reads it (``MCP_SKILL_RUN`` from its own environment)."""

    source: GrantSource  # ``grantrules.grant_source``: the server's vocabulary and rule
    rows: tuple[GrantRow, ...] = ()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Grants:
        raw = environ.get("MCP_SKILL_RUN")
        source = grant_source(raw, hosted=is_hosted(environ))
        if raw is None:
            return cls(source)
        rows, _errors, _invalid = parse_rows(raw)  # the server reports the errors; here they grant nothing
        return cls(source, rows)

    def allowed(self, skill: DeclaredSkill, decl: DeclaredScript) -> Granted | None:
        """Declared ∩ granted (``grantrules``, the server's rule), loader variables removed; ``None``
        when nothing grants the script."""
        if self.source == "declaration":
            return by_declaration(decl.env, skill.egress)
        rows = [r for r in self.rows if r.skill == skill.name and r.script == decl.script]
        if not rows:
            return None
        return intersect(rows, decl.env, skill.egress)

    def held_names(self, skills: Mapping[str, DeclaredSkill]) -> tuple[str, ...]:
        """The variables whose values the launcher keeps for scripts and never gives the server."""
        if self.source == "MCP_SKILL_RUN":
            names = {n for r in self.rows for n in r.env}
        elif self.source == "declaration":
            names = {n for s in skills.values() for d in s.scripts for n in d.env}
        else:
            names = set()
        return tuple(sorted(n for n in names if forbidden_variable(n) is None))


def _refuse(reason: Refusal, detail: str, **data: object) -> SkillMcpError:
    return SkillMcpError(reason, detail, dict(data))


def _declared(req: Request, skills: Mapping[str, DeclaredSkill]) -> tuple[DeclaredSkill, DeclaredScript]:
    skill = skills.get(req.skill)
    if skill is None:
        raise _refuse(Refusal.UNKNOWN_SKILL, f"no skill named {req.skill!r} declares scripts here", skill=req.skill)
    decl = skill.script(req.script)
    if decl is None:
        raise _refuse(
            Refusal.UNDECLARED_SCRIPT,
            f"{req.script!r} is not declared by {skill.name}",
            skill=skill.name,
            script=req.script,
            declared=[d.script for d in skill.scripts],
        )
    return skill, decl


def _interpreter(req: Request, decl: DeclaredScript, interpreters: Mapping[str, str]) -> str:
    if req.interpreter is not None and req.interpreter != decl.interpreter:
        raise _refuse(
            Refusal.INTERPRETER_MISMATCH,
            f"the script is declared for {decl.interpreter!r}, not {req.interpreter!r}",
            declared=decl.interpreter,
        )
    path = interpreters.get(decl.interpreter)
    if path is None:
        raise _refuse(
            Refusal.INTERPRETER_UNAVAILABLE,
            f"the interpreter {decl.interpreter!r} is not in this image's closed set {sorted(interpreters)}",
            interpreter=decl.interpreter,
        )
    return path


def _script_path(req: Request, skill: DeclaredSkill, roots: tuple[str, ...]) -> tuple[str, str]:
    base = skill.directory
    if os.path.realpath(base) != base or not any(is_inside(Path(r), Path(base)) for r in roots):
        raise _refuse(Refusal.OUTSIDE_SKILL, "the skill's directory is not a real directory inside the skills roots")
    real, _st = resolve_inside(Path(base), req.script)
    return base, str(real)


def _env(req: Request, allowed: Granted, environ: Mapping[str, str]) -> dict[str, str]:
    allow = {*FIXED_ENV, *HOST_ENV, *allowed.env}
    for name in req.env or ():
        if is_loader_variable(name):
            raise _refuse(
                Refusal.ENV_FORBIDDEN,
                f"{name} is a loader or interpreter start-up variable; it is never handed",
                name=name,
            )
        if name not in allow:
            raise _refuse(
                Refusal.ENV_NOT_GRANTED,
                f"{name} is neither in the fixed allowlist nor granted and declared for this script",
                name=name,
                granted=list(allowed.env),
            )
    # The values, by the server's own rule (``grantrules.owner_values``); ``broker_env`` adds the rest.
    return owner_values(environ, allowed.env, data_dir=environ.get("MCP_DATA_DIR"), only=req.env)


def broker_env(values: Mapping[str, str], scratch: str, proxy_port: int) -> dict[str, str]:
    """The environment the broker execs a script with: the job's values, with the names the broker
    owns set by the shared rule (``grantrules.exec_env``): the fixed ``PATH``, ``HOME`` and
    ``TMPDIR`` the run's scratch directory, and the egress proxy."""
    return exec_env(values, scratch, path=FIXED_PATH, home=scratch, proxy_url=f"http://127.0.0.1:{proxy_port}")


def _timeout(req: Request, decl: DeclaredScript) -> float:
    ceiling = clamp_timeout(decl.timeout)
    if req.timeout_s is None:
        return ceiling
    if req.timeout_s > ceiling:
        raise _refuse(
            Refusal.TIMEOUT_NOT_ALLOWED,
            f"timeout {req.timeout_s:g} s is above the {ceiling:g} s the "
            "script may have (its declaration, at most the ceiling)",
            allowed=ceiling,
        )
    return req.timeout_s


def decide(
    req: Request,
    *,
    skills: Mapping[str, DeclaredSkill],
    grants: Grants,
    interpreters: Mapping[str, str],
    roots: tuple[str, ...],
    environ: Mapping[str, str],
) -> Job:
    """The run the policy allows for ``req``, or ``SkillMcpError`` with the reason it does not."""
    skill, decl = _declared(req, skills)
    allowed = grants.allowed(skill, decl)
    if allowed is None:
        raise _refuse(
            Refusal.NOT_GRANTED,
            f"{decl.script} is declared but the owner's grant ({grants.source}) does not allow it",
            skill=skill.name,
            script=decl.script,
            grantFrom=grants.source,
        )
    interpreter = _interpreter(req, decl, interpreters)
    cwd, script = _script_path(req, skill, roots)
    env = _env(req, allowed, environ)
    egress = allowed_hosts(allowed.egress, req.egress)
    timeout = _timeout(req, decl)
    return Job(argv=(interpreter, script, *req.args), cwd=cwd, env=env, timeout_s=timeout, egress=egress)
