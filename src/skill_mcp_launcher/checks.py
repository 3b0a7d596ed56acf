"""The broker's own checks of a run request. It trusts nothing the server sends.

The server already checked all of this; the broker checks it again because the server is
the less privileged side and may be compromised. A request passes only when:

* every field has the expected type and size;
* the interpreter is one of the closed set this image has, at the absolute path the broker
  resolved itself at boot, and ``argv[0]`` is that path;
* ``cwd`` is an absolute real path of a skill directory (holding ``SKILL.md``) inside one of
  the skills roots the launcher was given;
* the script passes ``skill_mcp.paths``: the string check, then the resolved real path is a
  regular file inside ``cwd``, and ``argv[1]`` is that real path;
* environment names are plain identifiers and no value holds NUL; the broker then fixes
  ``PATH``, ``HOME``, ``TMPDIR`` and the proxy variables itself;
* egress names are plain DNS host names (``proxy.valid_host``); others are dropped and
  reported in the result's notes.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skill_mcp.errors import SkillMcpError
from skill_mcp.paths import is_inside, resolve_inside
from skill_mcp.reasons import Refusal
from skill_mcp_launcher import proxy
from skill_mcp_launcher.sandbox import Job

FIXED_PATH = "/usr/local/bin:/usr/bin:/bin"
CANDIDATES = {"node": ("node", "nodejs"), "python": ("python3", "python"), "bash": ("bash",)}
MAX_TIMEOUT_S = 300.0
MAX_ARGS = 256
MAX_ARGV_BYTES = 128 * 1024
MAX_ENV = 256
MAX_ENV_BYTES = 256 * 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# Set by the broker for every run; whatever the server sent for these is replaced.
BROKER_ENV = ("PATH", "HOME", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
              "NO_PROXY", "no_proxy")


def resolve_interpreters() -> dict[str, str]:
    found: dict[str, str] = {}
    for name, exes in CANDIDATES.items():
        for exe in exes:
            hit = shutil.which(exe, path=FIXED_PATH)
            if hit:
                found[name] = os.path.realpath(hit)
                break
    return found


def _bad(detail: str, reason: Refusal = Refusal.INVALID_ARGUMENTS) -> SkillMcpError:
    return SkillMcpError(reason, detail)


def _str(value: Any, what: str, limit: int = 4096) -> str:
    if not isinstance(value, str) or "\0" in value or len(value) > limit:
        raise _bad(f"{what} must be a string without NUL, at most {limit} characters")
    return value


def _roots_containing(cwd_real: str, roots: tuple[str, ...]) -> bool:
    return any(is_inside(Path(root), Path(cwd_real)) for root in roots)


def check_plan(raw: Any, *, interpreters: Mapping[str, str], roots: tuple[str, ...]) -> tuple[Job, list[str]]:
    """Validate a run request; return the job and notes, or raise ``SkillMcpError``."""
    if not isinstance(raw, dict):
        raise _bad("the plan must be an object")
    name = _str(raw.get("interpreter"), "interpreter", 32)
    path = _str(raw.get("interpreter_path"), "interpreter_path")
    if interpreters.get(name) != path:
        raise _bad(f"interpreter {name!r} at {path!r} is not in this image's closed set {sorted(interpreters)}",
                   Refusal.INTERPRETER_UNAVAILABLE)
    argv = raw.get("argv")
    if not isinstance(argv, list) or not 2 <= len(argv) <= MAX_ARGS:
        raise _bad(f"argv must be a list of 2 to {MAX_ARGS} strings")
    argv_t = tuple(_str(a, "an argument", MAX_ARGV_BYTES) for a in argv)
    if sum(len(a.encode("utf-8", "surrogatepass")) for a in argv_t) > MAX_ARGV_BYTES:
        raise _bad("argv is too large")
    if argv_t[0] != path:
        raise _bad("argv[0] must be the interpreter's path", Refusal.INTERPRETER_UNAVAILABLE)
    cwd = _str(raw.get("cwd"), "cwd")
    cwd_real = os.path.realpath(cwd)
    if not os.path.isabs(cwd) or cwd_real != cwd or not _roots_containing(cwd_real, roots):
        raise _bad("cwd is not a real skill directory inside the skills roots", Refusal.OUTSIDE_SKILL)
    if not os.path.isfile(os.path.join(cwd_real, "SKILL.md")):
        raise _bad("cwd is not a skill directory (no SKILL.md)", Refusal.OUTSIDE_SKILL)
    script = _str(raw.get("script"), "script", 1024)
    real, _st = resolve_inside(Path(cwd_real), script)
    if argv_t[1] != str(real):
        raise _bad("argv[1] must be the script's resolved real path", Refusal.OUTSIDE_SKILL)
    env = _check_env(raw.get("env"))
    timeout = raw.get("timeout_s")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise _bad(f"timeout_s must be a number in (0, {MAX_TIMEOUT_S:g}]")
    egress_raw = raw.get("egress", [])
    if not isinstance(egress_raw, list) or len(egress_raw) > 256:
        raise _bad("egress must be a list of host names")
    egress = tuple(h for h in egress_raw if proxy.valid_host(h))
    notes = [f"egress entry refused (not a plain DNS host name): {h!r}"[:300]
             for h in egress_raw if not proxy.valid_host(h)]
    return Job(argv=argv_t, cwd=cwd_real, env=env, timeout_s=float(timeout), egress=egress), notes


def _check_env(env: Any) -> dict[str, str]:
    if not isinstance(env, dict) or len(env) > MAX_ENV:
        raise _bad(f"env must be an object of at most {MAX_ENV} entries")
    out: dict[str, str] = {}
    total = 0
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise _bad("an environment name is not a plain identifier")
        out[key] = _str(value, f"env[{key}]", MAX_ENV_BYTES)
        total += len(key) + len(value)
    if total > MAX_ENV_BYTES:
        raise _bad("the environment is too large")
    return out


def run_env(env: Mapping[str, str], scratch: str, proxy_port: int) -> dict[str, str]:
    """The environment the script gets: the checked plan's, with broker-owned names fixed."""
    out = {k: v for k, v in env.items() if k not in BROKER_ENV}
    url = f"http://127.0.0.1:{proxy_port}"
    out.update(PATH=FIXED_PATH, HOME=scratch, TMPDIR=scratch, HTTP_PROXY=url, HTTPS_PROXY=url,
               http_proxy=url, https_proxy=url)
    return out
