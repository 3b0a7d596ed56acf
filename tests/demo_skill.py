"""The demo skill the ``skill_run`` end-to-end suites serve (stdio in tests/fence, HTTP in
tests/http, the run decisions in tests/surfaces), and the elicitation answer they give.

The script appends to a marker file named by its first argument, so "ran exactly once" and "ran
not at all" are facts on disk.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types

ECHO = "import json, sys\nopen(sys.argv[1], 'a').write('ran\\n')\nprint(json.dumps(sys.argv[2:]))\n"
SKILL_MD = """---
name: demo
description: Echoes its arguments.
mcp-host:
  version: 1
  run:
    - script: scripts/echo.py
      interpreter: python
      timeout: 20
---
Run scripts/echo.py.
"""


def write_demo(root: Path) -> Path:
    """Write the demo skill into ``root`` and an ``out/`` directory for the markers; return ``root``.

    ``out/`` is world-writable: a root server drops scripts to nobody, who writes the marker.
    """
    (root / "demo" / "scripts").mkdir(parents=True)
    (root / "demo" / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (root / "demo" / "scripts" / "echo.py").write_text(ECHO, encoding="utf-8")
    (root / "out").mkdir()
    (root / "out").chmod(0o777)
    return root


@contextmanager
def demo_root(prefix: str) -> Iterator[Path]:
    """A temporary skills root holding the demo, world-readable (nobody reads the script), removed after."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    try:
        yield write_demo(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Prompts:
    """An elicitation callback that answers with ``action`` and records what it was shown."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.messages: list[str] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.messages.append(params.message)
        return types.ElicitResult(action=self.action, content={"confirm": True} if self.action == "accept" else None)
