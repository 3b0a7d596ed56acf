"""Run the installed ``skill-mcp`` console script as a real subprocess, with bounded waits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.serve import SKILL_MCP

GOOD = (
    "---\nname: {name}\ndescription: {name} turns notes into reports. Use when a report is needed.\n"
    "metadata:\n  phase: {phase}\n---\n# {name}\n\n## Steps\n\n1. Read `references/guide.md`.\n2. Write.\n"
)


def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "SKILL_MCP_LOG": "warning", "HOME": "/tmp"}
    return subprocess.run(
        [SKILL_MCP, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**base, **(env or {})},
        input=stdin if stdin is not None else "",
    )


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def tree(root: Path) -> Path:
    """Two good skills (phases wire and verify) and one with broken frontmatter."""
    for name, phase in (("alpha", "wire"), ("beta", "verify")):
        write(root / name / "SKILL.md", GOOD.format(name=name, phase=phase))
        write(root / name / "references" / "guide.md", "# Guide\n")
    write(root / "broken" / "SKILL.md", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
    return root
