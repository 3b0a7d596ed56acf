"""A two-skill pack on disk and ``skill-mcp pack lock`` run on it: what the pack tests and the cache
tests both build."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.serve import SKILL_MCP


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_pack(root: Path) -> Path:
    for name in ("alpha", "beta"):
        write(
            root / name / "SKILL.md",
            f"---\nname: {name}\ndescription: {name} does a thing. Use when testing.\n"
            f"metadata:\n  phase: verify\n  tags: one, two\n---\n# {name}\n\n1. Step.\n",
        )
    write(root / "alpha" / "scripts" / "run.py", "print('hi')\n")
    return root


def lock(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SKILL_MCP, "pack", "lock", str(root), *extra], capture_output=True, text=True, timeout=60, check=False
    )
