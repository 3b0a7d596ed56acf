"""The shape of a run request. It trusts nothing the server sends.

The server only *asks*: a request names the skill, the script, the script's arguments and,
optionally, a shorter timeout. It may also repeat what its preview showed the user - the
interpreter, the variable names, the hosts - so that the broker can refuse a request whose
preview promised something the policy does not allow; those never widen anything
(``policy.decide``). Everything else - the interpreter's path, argv, cwd, every variable's
value, the egress allowlist, the limits - the broker derives itself. A request that carries
anything else (``argv``, ``cwd``, variable *values*, ...) is refused as ``invalid-arguments``.

This module checks types and sizes only; ``policy`` decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from skill_mcp.errors import SkillMcpError
from skill_mcp.grantrules import NAME_RE
from skill_mcp.limits import MAX_ARG_CHARS, MAX_ARGS, MAX_ARGS_TOTAL_CHARS
from skill_mcp.reasons import Refusal

REQUEST_KEYS = frozenset({"skill", "script", "args", "timeout_s", "interpreter", "env", "egress"})
MAX_NAMES = 256


@dataclass(frozen=True, slots=True)
class Request:
    """What the server asked for. ``None``: not named (the policy's own value applies)."""

    skill: str
    script: str
    args: tuple[str, ...]
    timeout_s: float | None = None
    interpreter: str | None = None
    env: tuple[str, ...] | None = None
    egress: tuple[str, ...] | None = None


def _bad(detail: str, reason: Refusal = Refusal.INVALID_ARGUMENTS) -> SkillMcpError:
    return SkillMcpError(reason, detail)


def _str(value: Any, what: str, limit: int = 4096) -> str:
    if not isinstance(value, str) or not value or "\0" in value or len(value) > limit:
        raise _bad(f"{what} must be a non-empty string without NUL, at most {limit} characters")
    return value


def _args(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _bad("args must be a list of strings")
    if len(value) > MAX_ARGS:
        raise _bad(f"at most {MAX_ARGS} arguments", Refusal.TOO_MANY_ARGS)
    out = []
    for i, arg in enumerate(value):
        if not isinstance(arg, str) or "\0" in arg:
            raise _bad(f"argument {i} must be a string without NUL")
        if len(arg) > MAX_ARG_CHARS:
            raise _bad(f"argument {i} is over {MAX_ARG_CHARS} characters", Refusal.TOO_MANY_ARGS)
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad(f"argument {i} is not valid UTF-8") from None
        out.append(arg)
    if sum(map(len, out)) > MAX_ARGS_TOTAL_CHARS:
        raise _bad(f"the arguments total over {MAX_ARGS_TOTAL_CHARS} characters", Refusal.TOO_MANY_ARGS)
    return tuple(out)


def _names(value: Any, what: str, limit: int) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_NAMES:
        raise _bad(f"{what} must be a list of at most {MAX_NAMES} names (the server never sends values)")
    return tuple(_str(v, f"an entry of {what}", limit) for v in value)


def parse_request(raw: Any) -> Request:
    """Check a run request's shape; ``SkillMcpError`` (``invalid-arguments``, ``too-many-args``) if wrong."""
    if not isinstance(raw, dict):
        raise _bad("the run request must be an object")
    unknown = sorted(set(raw) - REQUEST_KEYS)
    if unknown:
        raise _bad(f"the run request names {unknown}: the broker decides those itself")
    timeout = raw.get("timeout_s")
    # NaN compares false with every deadline, so a NaN timeout would never expire: finite only.
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0
    ):
        raise _bad("timeout_s must be a positive, finite number of seconds")
    env = _names(raw.get("env"), "env", 128)
    if env is not None and not all(NAME_RE.fullmatch(n) for n in env):
        raise _bad("an environment name is not a plain identifier")
    interpreter = raw.get("interpreter")
    return Request(
        skill=_str(raw.get("skill"), "skill", 255),
        script=_str(raw.get("script"), "script", 1024),
        args=_args(raw.get("args", [])),
        timeout_s=None if timeout is None else float(timeout),
        interpreter=None if interpreter is None else _str(interpreter, "interpreter", 32),
        env=env,
        egress=_names(raw.get("egress"), "egress", 253),
    )
