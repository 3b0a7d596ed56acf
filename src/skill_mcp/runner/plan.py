"""From a declared script and a grant to a ``RunPlan`` and the preview the user approves.

The checks run in the order ``docs/fence.md`` gives: the skill is served
and declares the script; its interpreter is in this deployment's closed set; a grant covers
it; the path passes the string check and then the resolved check; the arguments are within
bounds. Each failure is a ``SkillMcpError`` with its own reason.

``will_run`` is names only, never a value: it is shown to the user and is the payload the
confirm token is bound to. The script's digest is part of it, so a script edited between the
preview and the run no longer matches its token.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import MAX_ARG_CHARS, MAX_ARGS, MAX_ARGS_TOTAL_CHARS, READ_CAPS, clamp_timeout
from skill_mcp.models import Skill
from skill_mcp.paths import open_regular, resolve_inside
from skill_mcp.reasons import Refusal
from skill_mcp.runner.grants import GrantSet, ScriptGrant
from skill_mcp.runner.interpreters import Interpreters
from skill_mcp.runner.script_env import plan_env
from skill_mcp.runner.types import RunPlan

MAX_SCRIPT_BYTES = READ_CAPS.script  # a skill's whole size limit; a script is never bigger


@dataclass(frozen=True, slots=True)
class Prepared:
    """A checked plan plus the preview shown to the user (``will_run``, names only)."""

    plan: RunPlan
    will_run: Mapping[str, Any]

    def canonical(self) -> bytes:
        return canonical_json(self.will_run)


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def check_args(args: Sequence[Any]) -> tuple[str, ...]:
    """Arguments are passed verbatim; bound their count and size and refuse NUL."""
    if not isinstance(args, (list, tuple)):
        raise SkillMcpError(Refusal.INVALID_ARGUMENTS, "args must be an array of strings")
    if len(args) > MAX_ARGS:
        raise SkillMcpError(Refusal.TOO_MANY_ARGS, f"at most {MAX_ARGS} arguments", {"count": len(args)})
    total = 0
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise SkillMcpError(Refusal.INVALID_ARGUMENTS, f"argument {i} is not a string", {"index": i})
        if "\x00" in arg:
            raise SkillMcpError(Refusal.INVALID_ARGUMENTS, f"argument {i} holds a NUL byte", {"index": i})
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise SkillMcpError(Refusal.INVALID_ARGUMENTS, f"argument {i} is not valid UTF-8", {"index": i}) from None
        if len(arg) > MAX_ARG_CHARS:
            raise SkillMcpError(Refusal.TOO_MANY_ARGS, f"argument {i} is over {MAX_ARG_CHARS} characters", {"index": i})
        total += len(arg)
    if total > MAX_ARGS_TOTAL_CHARS:
        raise SkillMcpError(Refusal.TOO_MANY_ARGS, f"the arguments total over {MAX_ARGS_TOTAL_CHARS} characters")
    return tuple(args)


def script_digest(real: Path, st: os.stat_result, rel: str) -> str:
    """SHA-256 of the script as it is now, read through the descriptor the path checks vouched for."""
    fd = open_regular(real, st, rel)
    h = hashlib.sha256()
    read = 0
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(1 << 16):
            read += len(chunk)
            if read > MAX_SCRIPT_BYTES:
                raise SkillMcpError(Refusal.FILE_TOO_LARGE, "the script is larger than a skill may be", {"path": rel})
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _grant_for(skill: Skill, script: str, grants: GrantSet) -> ScriptGrant:
    grant = grants.get(skill.name, script)
    if grant is None:
        why = (grants.note or "no MCP_SKILL_RUN row grants it") if grants.grant_from != "declaration" else ""
        raise SkillMcpError(
            Refusal.NOT_GRANTED,
            f"{script} is declared but not granted: {why}".rstrip(": "),
            {"skill": skill.name, "script": script, "grantFrom": grants.grant_from},
        )
    return grant


def _will_run(
    plan: RunPlan, grant: ScriptGrant, fields: list[dict[str, Any]], *, spawner: str, runs_as: str | None
) -> dict[str, Any]:
    """The preview: names only, never a value. It is what the confirm token is bound to."""
    handed = [f["name"] for f in fields if f.get("grantedBy") and f.get("present")]
    accepted = "MCP_SKILL_RUN" if grant.source == "MCP_SKILL_RUN" else "standalone default"
    will_run: dict[str, Any] = {
        "skill": plan.skill,
        "script": plan.script,
        "interpreter": plan.interpreter,
        "interpreterPath": plan.interpreter_path,
        "argv": list(plan.argv),
        "cwd": plan.cwd,
        "timeoutSeconds": plan.timeout_s,
        "env": fields,
        "scriptDigest": plan.script_digest,
        "egress": [
            {"host": h, "declaredBy": f"skill {plan.skill} (mcp-host: egress)", "acceptedBy": accepted}
            for h in grant.egress
        ],
        "spawner": spawner,
    }
    if spawner == "local":
        will_run["containment"] = (
            "standalone: the script's process group is ended when it exits or times out; "
            "a process that starts a session of its own may outlive the run"
        )
    if runs_as:
        will_run["runsAs"] = runs_as
    if grant.source == "declaration" and handed:
        will_run["envWarning"] = (
            "standalone mode: this script will be handed " + ", ".join(handed) + " from this server's own "
            "environment because the skill declared them; nobody granted them explicitly (set MCP_SKILL_RUN "
            "to decide which variables a script gets)"
        )
    return will_run


def prepare(
    skill: Skill | None,
    skill_name: str,
    script: str,
    args: Sequence[Any],
    *,
    grants: GrantSet,
    interpreters: Interpreters,
    environ: Mapping[str, str],
    data_dir: str | None = None,
    runs_as: str | None = None,
    spawner: str = "local",
    held: frozenset[str] = frozenset(),
) -> Prepared:
    """Check everything that can be checked before confirmation and build the plan and preview."""
    if skill is None:
        raise SkillMcpError(Refusal.UNKNOWN_SKILL, f"no skill named {skill_name!r} is served", {"skill": skill_name})
    decl = skill.declaration.script(script) if skill.declaration else None
    if decl is None:
        declared = [r.script for r in skill.declaration.run] if skill.declaration else []
        raise SkillMcpError(
            Refusal.UNDECLARED_SCRIPT,
            "only scripts declared in the skill's mcp-host: run: block can run; declared: "
            + (", ".join(declared) or "none"),
            {"skill": skill.name, "script": script, "declared": declared},
        )
    interpreter_path = interpreters.path_for(decl.interpreter, script=script)
    grant = _grant_for(skill, script, grants)
    base = Path(os.path.realpath(skill.directory))
    real, st = resolve_inside(base, script)
    digest = script_digest(real, st, script)
    argv = (interpreter_path, str(real), *check_args(args))
    env, fields = plan_env(grant, environ, data_dir, held)
    plan = RunPlan(
        skill=skill.name,
        script=script,
        interpreter=decl.interpreter,
        interpreter_path=interpreter_path,
        argv=argv,
        cwd=str(base),
        env=env,
        timeout_s=clamp_timeout(decl.timeout),
        egress=grant.egress,
        script_digest=digest,
    )
    will_run = _will_run(plan, grant, fields, spawner=spawner, runs_as=runs_as)
    return Prepared(plan=plan, will_run=will_run)
