"""The grant rules both sides apply: where grants come from, the environment allowlist, the
forbidden list, the row syntax, the intersection of rows with a declaration and the script's
environment built from them.

``runner.grants`` (the server's view, with problems for ``skill_list``) and the appliance's
broker (``skill_mcp_launcher.policy``, which decides for itself) read ``MCP_SKILL_RUN``, judge
variable names and intersect rows with what a script declares through this one module, so
there is one forbidden list, one row syntax and one answer to "what does this script get".
Both ask ``grant_source`` where grants come from (one vocabulary: ``GrantSource``) and build
the script's environment with ``owner_values`` and ``exec_env``
(tests/launcher/test_shared_rules.py holds each pair equal).
A leaf: the standard library only, admitted by the launcher's import allowlist.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from skill_mcp import jsonbound
from skill_mcp.outputs import OUTPUT_DIR_NAME, OUTPUT_ENV

# Their presence marks a hosted process: without MCP_SKILL_RUN nothing is granted.
HOSTED_MARKERS = ("MCP_SKILLS_PATH", "MCP_HOST_METER_FILE", "MCP_DATA_DIR", "MCP_BLOB_BASE_URL")

# Where a process's grants come from: the one vocabulary of ``grantFrom`` (``skill_list``, the
# broker's hello, every ``not-granted`` refusal), whichever side says it.
GrantSource = Literal["MCP_SKILL_RUN", "declaration", "hosted-default"]
GRANT_SOURCES: tuple[GrantSource, ...] = ("MCP_SKILL_RUN", "declaration", "hosted-default")


def is_hosted(environ: Mapping[str, str]) -> bool:
    """A host (mcp-host's runner) started this process: any of ``HOSTED_MARKERS`` is set."""
    return any(marker in environ for marker in HOSTED_MARKERS)


def grant_source(skill_run: str | None, *, hosted: bool) -> GrantSource:
    """Where grants come from: ``MCP_SKILL_RUN`` when it is set (even malformed: then it grants
    nothing), else fail closed when hosted (``hosted-default``: nothing runs), else the
    declarations stand (``declaration``). The server (``config``, ``runner.grants``, a server
    without a runner) and the appliance's broker (``skill_mcp_launcher.policy``) both ask this."""
    if skill_run is not None:
        return "MCP_SKILL_RUN"
    return "hosted-default" if hosted else "declaration"


# The fixed half of a script's environment; a declaration cannot rename or widen it. The
# spawner sets PATH, HOME, TMPDIR and SKILL_OUTPUT_DIR itself; LANG and TZ come from the owner's
# environment.
FIXED_ENV = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "SKILL_OUTPUT_DIR")
HOST_ENV = ("MCP_DATA_DIR",)  # handed when the host set it
FROM_OWNER = ("LANG", "TZ")  # handed from the owner's environment when set and not empty
# The spawner's own names: whatever the values passed in hold, ``exec_env`` sets these itself.
SPAWNER_ENV = ("PATH", "HOME", "TMPDIR", OUTPUT_ENV)
# Owned by the spawner too when a run goes through the appliance's egress proxy.
PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY_ENV = ("NO_PROXY", "no_proxy")

# Loader and interpreter start-up variables: each turns "run this declared file" into "run
# some other code first", so none is ever handed, whoever declared or granted it.
FORBIDDEN_EXACT = frozenset(
    {
        "NODE_OPTIONS",
        "NODE_PATH",
        "NODE_EXTRA_CA_CERTS",
        "NODE_REPL_EXTERNAL_MODULE",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "IFS",
        "CDPATH",
        "GLOBIGNORE",
        "GCONV_PATH",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "RES_OPTIONS",
        "MALLOC_CHECK_",
        "MALLOC_PERTURB_",
        "PERL5LIB",
        "PERL5OPT",
        "RUBYOPT",
        "RUBYLIB",
        "OPENSSL_CONF",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)
FORBIDDEN_PREFIXES = ("LD_", "PYTHON", "NODE_", "NPM_CONFIG_", "BASH_FUNC_", "DYLD_", "GLIBC_", "LC_")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
ROW_KEYS = frozenset({"skill", "script", "env", "egress"})
MAX_RAW_CHARS = 256 * 1024


@dataclass(frozen=True, slots=True)
class DeclarationBounds:
    """What one skill's ``mcp-host:`` declaration may hold, written once for both sides.

    The catalog refuses a declaration past any of these (``declaration-invalid``: the skill's
    scripts are not served, ``validate`` and ``skill_list`` say why), and the appliance's broker
    drops a skill whose entry in the declarations document is past them, keeping every other
    skill runnable. So what ``validate`` passes, the broker accepts.
    """

    scripts: int = 256  # entries of ``run``
    hosts: int = 256  # entries of ``egress``
    names: int = 256  # variables one script declares (its ``env``), and entries of the top-level ``env``
    script_chars: int = 1024  # a script's relative path
    interpreter_chars: int = 32
    name_chars: int = 128  # a variable name (``NAME_RE``)
    host_chars: int = 253  # a DNS name
    skill_chars: int = 255  # a skill's name: one directory entry
    directory_chars: int = 4096  # a skill directory's absolute path (PATH_MAX)
    timeout_s: int = 24 * 3600  # the broker's ceiling on a declared timeout; the catalog clamps lower

    def table(self) -> dict[str, str]:
        """Bound name -> value, as docs/fence.md's limits table spells it."""
        return {
            "declared scripts": f"{self.scripts} per declaration",
            "declared hosts": f"{self.hosts} per declaration",
            "declared variables": f"{self.names} per script",
            "declared script path": f"{self.script_chars} characters",
        }


DECLARATION_BOUNDS = DeclarationBounds()


def forbidden_variable(name: str) -> str | None:
    """Why ``name`` can never be granted to a script, or ``None`` when it may be."""
    if not NAME_RE.fullmatch(name):
        return "not a plain variable name"
    if name in FIXED_ENV or name in HOST_ENV:
        return "set by the fence itself; a declaration cannot replace it"
    if name in FORBIDDEN_EXACT or name.upper().startswith(FORBIDDEN_PREFIXES):
        return "a loader or interpreter-startup variable"
    return None


def is_loader_variable(name: str) -> bool:
    """A loader or interpreter start-up variable (the forbidden list proper, not the fixed names)."""
    return name in FORBIDDEN_EXACT or name.upper().startswith(FORBIDDEN_PREFIXES)


@dataclass(frozen=True, slots=True)
class GrantRow:
    skill: str
    script: str
    env: tuple[str, ...] = ()
    egress: tuple[str, ...] = ()
    index: int = 0


def _str_list(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"'{key}' must be a list of strings")
    return tuple(value)


def parse_rows(raw: str) -> tuple[tuple[GrantRow, ...], tuple[str, ...], bool]:
    """Parse ``MCP_SKILL_RUN``: (rows, errors, whole_value_invalid).

    A malformed value yields no rows (fail closed); a malformed row costs only itself.
    """
    if len(raw) > MAX_RAW_CHARS:
        return (), (f"MCP_SKILL_RUN is over {MAX_RAW_CHARS} characters",), True
    try:
        data = jsonbound.loads(raw)
    except json.JSONDecodeError as exc:
        return (
            (),
            (f"MCP_SKILL_RUN is not JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}; nothing is granted",),
            True,
        )
    except ValueError as exc:  # nested deeper than any row needs (jsonbound.TooDeep), or a huge number
        return (), (f"MCP_SKILL_RUN is not accepted: {exc}; nothing is granted",), True
    if not isinstance(data, list):
        return (), ("MCP_SKILL_RUN must be a JSON array of rows; nothing is granted",), True
    rows: list[GrantRow] = []
    errors: list[str] = []
    for i, item in enumerate(data):
        try:
            if not isinstance(item, dict):
                raise ValueError("a row must be an object")
            unknown = sorted(set(item) - ROW_KEYS)
            if unknown:
                raise ValueError(f"unknown keys {unknown}")
            skill, script = item.get("skill"), item.get("script")
            if not isinstance(skill, str) or not isinstance(script, str) or not skill or not script:
                raise ValueError("'skill' and 'script' must be non-empty strings")
            rows.append(
                GrantRow(skill, script, _str_list(item.get("env"), "env"), _str_list(item.get("egress"), "egress"), i)
            )
        except ValueError as exc:
            errors.append(f"row {i}: {exc}; the row grants nothing")
    return tuple(rows), tuple(errors), False


def granted_names(raw: str | None) -> tuple[str, ...]:
    """Every variable name any row of ``MCP_SKILL_RUN`` names, forbidden ones left out."""
    if raw is None:
        return ()
    rows, _errors, _invalid = parse_rows(raw)
    names = {n for row in rows for n in row.env if forbidden_variable(n) is None}
    return tuple(sorted(names))


RefusedKind = Literal["unasked", "forbidden", "undeclared-host"]


@dataclass(frozen=True, slots=True)
class Refused:
    """One name a row grants that the script does not get: the server reports it, the broker ignores it."""

    row: int  # the row's index in MCP_SKILL_RUN
    kind: RefusedKind
    name: str
    why: str = ""  # for "forbidden": why the variable is never handed


@dataclass(frozen=True, slots=True)
class Granted:
    """What one declared script gets: variable names and hosts, in the declaration's order."""

    env: tuple[str, ...]
    egress: tuple[str, ...]
    refused: tuple[Refused, ...] = ()


def by_declaration(declared_env: Iterable[str], declared_hosts: Iterable[str]) -> Granted:
    """The standalone default (no ``MCP_SKILL_RUN``, not hosted): the declaration stands, loader
    variables removed."""
    env = tuple(dict.fromkeys(n for n in declared_env if forbidden_variable(n) is None))
    return Granted(env, tuple(dict.fromkeys(declared_hosts)))


def intersect(rows: Iterable[GrantRow], declared_env: Iterable[str], declared_hosts: Iterable[str]) -> Granted:
    """Declared ∩ granted for one script, over every row that names it (their union).

    A variable is handed only if the script declares it, a row grants it and it is not forbidden;
    a host only if the skill declares it and a row grants it. Everything a row grants beyond that
    comes back in ``refused``, in row order. The caller picks the rows (those naming this skill
    and script); with none, nothing is granted.
    """
    declared, hosts = tuple(declared_env), tuple(declared_hosts)
    granted_env: set[str] = set()
    granted_hosts: set[str] = set()
    refused: list[Refused] = []
    for row in rows:
        for name in row.env:
            if name not in declared:
                refused.append(Refused(row.index, "unasked", name))
            elif (why := forbidden_variable(name)) is not None:
                refused.append(Refused(row.index, "forbidden", name, why))
            else:
                granted_env.add(name)
        for host in row.egress:
            if host in hosts:
                granted_hosts.add(host)
            else:
                refused.append(Refused(row.index, "undeclared-host", host))
    return Granted(
        tuple(dict.fromkeys(n for n in declared if n in granted_env)),
        tuple(dict.fromkeys(h for h in hosts if h in granted_hosts)),
        tuple(refused),
    )


def owner_values(
    owner: Mapping[str, str], granted: Iterable[str], *, data_dir: str | None, only: Collection[str] | None = None
) -> dict[str, str]:
    """The values a script takes from the owner's environment: ``LANG`` and ``TZ`` when set and
    not empty, ``MCP_DATA_DIR`` (``data_dir``, the host's) when given, and each granted name the
    owner set (an empty value included). ``only`` (the names the user approved) narrows it.

    The server's spawner (``runner.script_env``) and the appliance's broker
    (``skill_mcp_launcher.policy``) both take a script's values from here; ``exec_env`` adds the
    names the spawner owns."""
    out = {n: owner[n] for n in FROM_OWNER if owner.get(n)}
    if data_dir:
        out["MCP_DATA_DIR"] = data_dir
    for name in granted:
        if name in owner and forbidden_variable(name) is None:
            out[name] = owner[name]
    return out if only is None else {n: v for n, v in out.items() if n in only}


def exec_env(
    values: Mapping[str, str], run_dir: str, *, path: str, home: str | None, proxy_url: str | None = None
) -> dict[str, str]:
    """The whole environment a script is exec'd with: ``values`` (``owner_values``) and the names
    the spawner owns, set here whatever ``values`` holds: ``PATH``, ``HOME`` (``home``; none when
    ``None``), ``TMPDIR`` the run's private directory, ``SKILL_OUTPUT_DIR`` inside it and, with a
    ``proxy_url``, the proxy variables (``NO_PROXY`` removed). One rule for both sides: the
    standalone spawner passes the owner's ``PATH`` and ``HOME`` (or the run's directory when the
    script is confined), the appliance's broker the fixed path, the run's directory and its proxy."""
    owned = (*SPAWNER_ENV, *PROXY_ENV, *NO_PROXY_ENV) if proxy_url else SPAWNER_ENV
    env = {"PATH": path}
    if home is not None:
        env["HOME"] = home
    env["TMPDIR"] = run_dir
    env[OUTPUT_ENV] = os.path.join(run_dir, OUTPUT_DIR_NAME)
    if proxy_url:
        env.update(dict.fromkeys(PROXY_ENV, proxy_url))
    env.update({k: v for k, v in values.items() if k not in owned})
    return env
