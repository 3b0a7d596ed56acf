"""The closed interpreter set, resolved once at boot.

A script names its interpreter in its declaration; the runner never infers one from the
file's extension or shebang, because a file that chooses its own interpreter has already
chosen its own program. Each name maps to a fixed list of executable names looked up on a
fixed ``PATH`` (never the caller's or the server's), and the absolute real path found at boot
is the one every run uses. A name that is missing in this deployment makes its scripts
``interpreter-unavailable``, reported with the set this deployment does have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import CANDIDATES, FIXED_PATH, KNOWN, find_interpreters
from skill_mcp.reasons import Refusal

# The lookup path and the closed set live in ``skill_mcp.limits``, shared with the broker.
__all__ = ["CANDIDATES", "FIXED_PATH", "KNOWN", "Interpreters", "resolve_interpreters"]


@dataclass(frozen=True, slots=True)
class Interpreters:
    """The interpreters this deployment has: declared name -> absolute real path."""

    paths: Mapping[str, str] = field(default_factory=dict)

    @property
    def available(self) -> tuple[str, ...]:
        return tuple(name for name in KNOWN if name in self.paths)

    def describe_set(self) -> str:
        have = ", ".join(self.available) or "none"
        return f"this deployment runs: {have} (closed set: {', '.join(KNOWN)})"

    def unavailable_detail(self, name: str) -> str:
        """The words both ``skill_list`` (``unavailableScripts``) and the ``skill_run`` refusal use."""
        why = "is not one this server knows" if name not in CANDIDATES else "is not installed here"
        return f"the interpreter {name!r} {why}; {self.describe_set()}"

    def path_for(self, name: str, *, script: str = "") -> str:
        """Return the absolute path for ``name`` or refuse with ``interpreter-unavailable``."""
        path = self.paths.get(name)
        if path is None:
            raise SkillMcpError(
                Refusal.INTERPRETER_UNAVAILABLE,
                self.unavailable_detail(name),
                {"script": script, "interpreter": name, "available": list(self.available)},
            )
        return path


def resolve_interpreters(search_path: str = FIXED_PATH, only: tuple[str, ...] | None = None) -> Interpreters:
    """Look each known interpreter up on ``search_path`` once; keep absolute real paths.

    ``only`` narrows the set (a deployment, or a test, that wants fewer interpreters).
    """
    return Interpreters(paths=find_interpreters(search_path, only))
