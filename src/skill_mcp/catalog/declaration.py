"""Read the ``mcp-host:`` block strictly.

A declaration narrows; it never grants. Rules:

* YAML 1.2 core, no anchors or aliases, 64 KiB (inherited from the frontmatter rules);
* ``version`` is required; an unknown MAJOR version refuses the block wholesale;
* unknown keys at any level are ignored and reported by name (``declaration-unknown-key``);
* a block that does not parse, or a field of the wrong type, is reported with the parser's
  position (``declaration-invalid``) and costs the skill its scripts - never its
  instructions, never the listing;
* so is a block past the bounds the appliance's broker holds (``grantrules.DECLARATION_BOUNDS``:
  how many scripts, hosts and variables, how long a script path or an interpreter name), so a
  declaration that validates is one the broker accepts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skill_mcp.catalog.frontmatter import FrontmatterError, HostChunk, check_json_safe, parse_yaml
from skill_mcp.grantrules import DECLARATION_BOUNDS as BOUNDS
from skill_mcp.limits import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S
from skill_mcp.limits import KNOWN as INTERPRETER_NAMES
from skill_mcp.models import Declaration, EnvField, ScriptDecl
from skill_mcp.paths import relpath_problem
from skill_mcp.reasons import Level, ProblemReason

SUPPORTED_MAJOR = 1
# The timeout ceiling and the closed interpreter set come from ``skill_mcp.limits``, shared
# with the broker. The set is part of the format, not of a deployment: a name outside it is
# reported here (``interpreter-unavailable``); whether *this* machine has a name in it is the
# runner's report.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
HOSTNAME = re.compile(r"^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$")
_TOP_KEYS = frozenset({"version", "run", "env", "egress"})
_RUN_KEYS = frozenset({"script", "interpreter", "env", "timeout", "description"})
_ENV_KEYS = frozenset({"name", "secret"})


class DeclarationError(ValueError):
    def __init__(
        self,
        message: str,
        reason: ProblemReason = ProblemReason.DECLARATION_INVALID,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.line = line
        self.column = column


@dataclass(frozen=True, slots=True)
class DeclarationResult:
    declaration: Declaration | None
    findings: tuple[tuple[ProblemReason, Level, str], ...] = ()
    # The block as the author wrote it (YAML -> JSON), for the verbatim frontmatter SEP-2640
    # publishes; None when there is no block or it does not parse.
    raw: Any = None
    parsed: bool = True


def _unknown(where: str, value: Mapping[str, Any], known: frozenset[str]) -> list[str]:
    return [f"{where}.{key}" for key in value if key not in known]


def _str_list(value: Any, where: str, bound: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DeclarationError(f"{where} must be a list of strings")
    _at_most(value, where, bound)
    return tuple(value)


def _at_most(value: list[Any], where: str, bound: int) -> None:
    if len(value) > bound:
        raise DeclarationError(f"{where} has {len(value)} entries; a declaration may name at most {bound}")


def _major(version: Any) -> int:
    if isinstance(version, bool) or version is None:
        raise DeclarationError("mcp-host.version is required and must be a number such as 1")
    if isinstance(version, int):
        return version
    if isinstance(version, (float, str)):
        head = str(version).split(".", 1)[0]
        if head.isdigit():
            return int(head)
    raise DeclarationError(f"mcp-host.version {version!r} is not a version number")


def _run_row(row: Any, index: int, unknown: list[str]) -> ScriptDecl:
    where = f"mcp-host.run[{index}]"
    if not isinstance(row, dict):
        raise DeclarationError(f"{where} must be a mapping with script and interpreter")
    unknown.extend(_unknown(where, row, _RUN_KEYS))
    script, interpreter = row.get("script"), row.get("interpreter")
    if not isinstance(script, str):
        raise DeclarationError(f"{where}.script must be a string path")
    if len(script) > BOUNDS.script_chars:
        raise DeclarationError(f"{where}.script is longer than {BOUNDS.script_chars} characters")
    problem = relpath_problem(script, allow_leading_dash=False)
    if problem is not None:
        raise DeclarationError(f"{where}.script {script!r}: {problem}")
    if not isinstance(interpreter, str) or not interpreter or len(interpreter) > BOUNDS.interpreter_chars:
        raise DeclarationError(f"{where}.interpreter must name an interpreter ({', '.join(INTERPRETER_NAMES)})")
    env = _str_list(row.get("env"), f"{where}.env", BOUNDS.names)
    for name in env:
        if not ENV_NAME.match(name):
            raise DeclarationError(f"{where}.env names {name!r}, which is not a variable name")
    timeout = row.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise DeclarationError(f"{where}.timeout must be a positive number of seconds")
    description = row.get("description")
    if description is not None and not isinstance(description, str):
        raise DeclarationError(f"{where}.description must be a string")
    return ScriptDecl(
        script=script,
        interpreter=interpreter,
        env=env,
        timeout=int(min(max(1, int(timeout)), MAX_TIMEOUT_S)),
        description=description,
    )


def _env_row(row: Any, index: int, unknown: list[str]) -> EnvField:
    where = f"mcp-host.env[{index}]"
    if isinstance(row, str):
        row = {"name": row}
    if not isinstance(row, dict) or not isinstance(row.get("name"), str) or not ENV_NAME.match(row["name"]):
        raise DeclarationError(f"{where} must be a mapping whose name is a variable name")
    unknown.extend(_unknown(where, row, _ENV_KEYS))
    secret = row.get("secret", False)
    if not isinstance(secret, bool):
        raise DeclarationError(f"{where}.secret must be true or false")
    return EnvField(name=row["name"], secret=secret)


def build_declaration(block: Any) -> tuple[Declaration, list[str]]:
    """Validate a parsed ``mcp-host`` value. Returns the declaration and unknown key names."""
    if not isinstance(block, dict):
        raise DeclarationError("mcp-host must be a mapping")
    major = _major(block.get("version"))
    if major != SUPPORTED_MAJOR:
        raise DeclarationError(
            f"mcp-host.version {major} is not supported (this server reads version 1)",
            ProblemReason.DECLARATION_VERSION,
        )
    unknown = _unknown("mcp-host", block, _TOP_KEYS)
    run_value = block.get("run") or []
    if not isinstance(run_value, list):
        raise DeclarationError("mcp-host.run must be a list")
    _at_most(run_value, "mcp-host.run", BOUNDS.scripts)
    run = tuple(_run_row(row, i, unknown) for i, row in enumerate(run_value))
    seen: set[str] = set()
    for row in run:
        if row.script in seen:
            raise DeclarationError(f"mcp-host.run declares {row.script!r} twice")
        seen.add(row.script)
    env_value = block.get("env") or []
    if not isinstance(env_value, list):
        raise DeclarationError("mcp-host.env must be a list")
    _at_most(env_value, "mcp-host.env", BOUNDS.names)
    env = tuple(_env_row(row, i, unknown) for i, row in enumerate(env_value))
    egress = _str_list(block.get("egress"), "mcp-host.egress", BOUNDS.hosts)
    for host in egress:
        if not HOSTNAME.match(host) or host.rsplit(".", 1)[-1].isdigit():
            raise DeclarationError(
                f"mcp-host.egress names {host!r}, which is not a lowercase host name (no IP literals, no wildcards)"
            )
    return Declaration(version=major, run=run, env=env, egress=egress), unknown


def read_declaration(chunk: HostChunk, first_line: int) -> DeclarationResult:
    """Parse and validate the raw ``mcp-host`` chunk of a frontmatter."""
    if not chunk.present:
        return DeclarationResult(None)
    try:
        parsed = parse_yaml(chunk.text, first_line)
    except FrontmatterError as exc:
        return DeclarationResult(
            None,
            (
                (
                    ProblemReason.DECLARATION_INVALID,
                    Level.ERROR,
                    f"the mcp-host block does not parse: {exc}; its scripts are not served",
                ),
            ),
            parsed=False,
        )
    block = parsed.get("mcp-host") if isinstance(parsed, dict) else None
    try:
        check_json_safe(block, "mcp-host")
    except FrontmatterError as exc:
        return DeclarationResult(
            None,
            ((ProblemReason.DECLARATION_INVALID, Level.ERROR, f"{exc}; its scripts are not served"),),
            parsed=False,
        )
    try:
        declaration, unknown = build_declaration(block)
    except DeclarationError as exc:
        return DeclarationResult(
            None, ((exc.reason, Level.ERROR, f"{exc.message}; its scripts are not served"),), raw=block
        )
    findings = tuple(
        (ProblemReason.DECLARATION_UNKNOWN_KEY, Level.WARNING, f"unknown key {key} ignored") for key in unknown
    )
    return DeclarationResult(declaration, findings + outside_closed_set(declaration), raw=block)


def outside_closed_set(declaration: Declaration) -> tuple[tuple[ProblemReason, Level, str], ...]:
    """One error per declared script whose interpreter no deployment runs.

    The declaration itself stays valid (its other scripts, env and egress are served); only
    that script is refused, the way ``skill_run`` refuses it.
    """
    return tuple(
        (
            ProblemReason.INTERPRETER_UNAVAILABLE,
            Level.ERROR,
            f"{row.script} names the interpreter {row.interpreter!r}, outside the closed set "
            f"({', '.join(INTERPRETER_NAMES)}); that script is never run - declare one of the set",
        )
        for row in declaration.run
        if row.interpreter not in INTERPRETER_NAMES
    )
