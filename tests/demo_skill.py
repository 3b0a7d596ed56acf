"""The demo skill the ``skill_run`` end-to-end suites serve (stdio in tests/fence, HTTP in
tests/http, the run decisions in tests/surfaces), and the elicitation answer they give.

The script's first argument is a label, and the server's audit record of every run it started
(``runner.audit``: one JSON line per spawn, whatever the result) is the fact that says "ran exactly
once" or "ran not at all" (``Marker``). The script itself can leave no mark anywhere: its kernel
sandbox lets it write only its own run directory, which is removed after the run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types

ECHO = "import json, sys\nprint(json.dumps(sys.argv[2:]))\n"  # argv[1]: the run's label (Marker)
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
    """Write the demo skill into ``root`` and an ``out/`` directory (the server's log); return ``root``."""
    (root / "demo" / "scripts").mkdir(parents=True)
    (root / "demo" / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (root / "demo" / "scripts" / "echo.py").write_text(ECHO, encoding="utf-8")
    (root / "out").mkdir()
    (root / "out").chmod(0o777)
    return root


class Marker:
    """How often the server ran the demo with ``label`` as its first argument, from its audit lines.

    Reads like the marker file it replaces (``exists``, ``read_text`` giving ``"ran\\n"`` per run),
    so a test says the same sentences. ``log`` returns the server's audit output so far; ``expect``
    waits (bounded) for a count a server may still be writing, where its log is read by a thread.
    """

    def __init__(self, log: Callable[[], str], label: str) -> None:
        self.log, self.label = log, label

    def __str__(self) -> str:
        return self.label

    def count(self) -> int:
        runs = 0
        for line in self.log().splitlines():
            if not line.startswith("{") or '"skill_run"' not in line:
                continue
            record = json.loads(line)
            if record.get("event") == "skill_run" and "status" in record and self.label in record.get("argv", [])[2:3]:
                runs += 1
        return runs

    def expect(self, runs: int, within_s: float = 10.0) -> int:
        deadline = time.monotonic() + within_s
        while self.count() < runs and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.count()

    def exists(self) -> bool:
        return self.count() > 0

    def read_text(self) -> str:
        return "ran\n" * self.expect(1)


def records_log(records: list[dict[str, Any]]) -> Callable[[], str]:
    """An in-process runner's audit sink's records, as the log ``Marker`` reads."""
    return lambda: "\n".join(json.dumps(r) for r in records)


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

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.messages.append(params.message)
        content = {"confirm": True} if self.action == "accept" else None
        return types.ElicitResult.model_validate({"action": self.action, "content": content})
