"""``make run``, the README's first command: a client wired to it reads nothing but protocol on
stdout, and it installs what serving needs, not the test tools."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HANDSHAKE = (
    "\n".join(
        json.dumps(m)
        for m in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "make", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        )
    )
    + "\n"
)

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_make_run_writes_nothing_but_protocol_on_stdout() -> None:
    # The first run on a checkout may install the runtime stamp: its output must go to stderr too.
    done = subprocess.run(
        ["make", "run"],
        cwd=REPO,
        input=HANDSHAKE,
        capture_output=True,
        text=True,
        timeout=570,
        check=False,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "SKILL_MCP_LOG": "warning"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert [json.loads(line).get("id") for line in lines] == [1, 2], done.stdout[:500]
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)


def test_make_run_installs_the_runtime_dependencies_only(tmp_path: Path) -> None:
    planned = subprocess.run(
        ["make", "-n", "run", f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    installs = [line for line in planned.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert len(installs) == 1 and "-e ." in installs[0] and "[dev]" not in planned
    # `make test` still gets the dev extras (the positive control).
    tested = subprocess.run(
        ["make", "-n", "test", f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert '-e ".[dev]"' in tested
