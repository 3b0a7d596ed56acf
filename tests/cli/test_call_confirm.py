"""``skill-mcp call skill_run`` confirms like a client and runs the script in the same session.

Before, every ``call`` was a new process with a new token key, so the documented "repeat the
call with the token" always ended in ``token-invalid`` and no script could ever run from the
command line. Now the CLI's session advertises elicitation: ``--yes`` accepts, a terminal is
asked (driven here through a real pseudo-terminal), and anything else declines.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import as_json, run, write
from tests.serve import SKILL_MCP

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SKILL = """---
name: hello
description: Says hello to whoever is named. Use when a greeting is needed.
mcp-host:
  version: 1
  run:
    - script: scripts/hi.py
      interpreter: python
---
# Hello

1. Run `scripts/hi.py NAME`.
"""
ARGS = json.dumps({"skill": "hello", "script": "scripts/hi.py", "args": ["there"]})


@pytest.fixture
def root() -> Iterator[Path]:
    """A skills root every uid can read: run as root, the server drops the script to ``nobody``,
    which cannot read pytest's tmp_path (under a 0700 directory)."""
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-call-"))
    base.chmod(0o755)
    write(base / "hello" / "SKILL.md", SKILL)
    write(base / "hello" / "scripts" / "hi.py", "import sys\nprint('hi', *sys.argv[1:])\n")
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_call_skill_run_with_yes_runs_the_script_and_prints_its_result(root: Path) -> None:
    done = run("call", "skill_run", "--skills-dir", str(root), "--args", ARGS, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    result = as_json(done)["structuredContent"]
    assert (result["status"], result["exitCode"], result["stdout"]) == ("ok", 0, "hi there\n")
    assert "Run python script scripts/hi.py of skill hello?" in done.stderr  # the preview was shown


def test_call_skill_run_prints_the_scripts_own_output_for_a_person(root: Path) -> None:
    done = run("call", "skill_run", "--skills-dir", str(root), "--args", ARGS, "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi there\n"  # as the script wrote it, not a JSON string with escapes
    assert done.stderr.splitlines()[-1].startswith("skill-mcp: hello scripts/hi.py: ok (exit 0, ")


def test_call_skill_run_of_a_failing_script_exits_1_with_its_output(root: Path) -> None:
    write(root / "hello" / "scripts" / "hi.py", "import sys\nprint('half done')\nsys.exit('broke')\n")
    done = run("call", "skill_run", "--skills-dir", str(root), "--args", ARGS, "--yes")
    assert done.returncode == 1  # a CI job running it with --yes sees the failure
    assert done.stdout == "half done\n" and "broke\n" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("skill-mcp: hello scripts/hi.py: error (exit 1, ")
    as_json_done = run("call", "skill_run", "--skills-dir", str(root), "--args", ARGS, "--yes", "--json")
    assert as_json_done.returncode == 1
    result = as_json(as_json_done)["structuredContent"]
    assert (result["status"], result["exitCode"], result["stdout"]) == ("error", 1, "half done\n")


def test_call_skill_run_with_yes_also_confirms_a_server_that_never_elicits(root: Path) -> None:
    done = run(
        "call",
        "skill_run",
        "--skills-dir",
        str(root),
        "--args",
        ARGS,
        "--yes",
        "--json",
        env={"MCP_CONFIRM_ELICITATION": "off"},
    )
    assert done.returncode == 0, done.stderr
    result = as_json(done)["structuredContent"]
    assert (result["status"], result["stdout"]) == ("ok", "hi there\n")


@pytest.mark.parametrize("elicitation", ["on", "off"])
def test_call_skill_run_without_a_terminal_or_yes_is_declined_and_runs_nothing(root: Path, elicitation: str) -> None:
    done = run(
        "call",
        "skill_run",
        "--skills-dir",
        str(root),
        "--args",
        ARGS,
        "--json",
        env={"MCP_CONFIRM_ELICITATION": elicitation},
    )
    assert done.returncode == 1
    out = as_json(done)
    assert "pass --yes" in done.stderr
    assert (out["structuredContent"] or {}).get("status") != "ok"
    if elicitation == "on":
        assert out["structuredContent"]["reason"] == "declined"
    else:
        assert out["declined"] is True and out["structuredContent"]["status"] == "confirmation-required"


def _on_a_terminal(root: Path, answer: str) -> tuple[int, str, str]:
    """Run ``call skill_run`` with stdin and stderr on a pty; answer the prompt; (exit, stdout, terminal)."""
    master, slave = pty.openpty()
    env = {"PATH": "/usr/bin:/bin", "SKILL_MCP_LOG": "warning", "HOME": "/tmp"}
    proc = subprocess.Popen(
        [SKILL_MCP, "call", "skill_run", "--skills-dir", str(root), "--args", ARGS, "--json"],
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
        env=env,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while b"[y/N]" not in seen:
            assert time.monotonic() < deadline, f"no prompt; terminal showed {seen!r}"
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                seen += os.read(master, 4096)
        os.write(master, answer.encode() + b"\n")
        stdout, _ = proc.communicate(timeout=60)
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed its side
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    return proc.returncode, stdout.decode(), seen.decode(errors="replace")


def test_call_skill_run_on_a_terminal_shows_the_preview_and_runs_on_yes(root: Path) -> None:
    code, stdout, terminal = _on_a_terminal(root, "y")
    assert code == 0, terminal
    assert "argv: [" in terminal and "cwd: " in terminal  # the preview, before the question
    result = json.loads(stdout)["structuredContent"]
    assert (result["status"], result["stdout"]) == ("ok", "hi there\n")


def test_call_skill_run_on_a_terminal_declined_with_no_runs_nothing(root: Path) -> None:
    code, stdout, terminal = _on_a_terminal(root, "n")
    assert code == 1, terminal
    assert json.loads(stdout)["structuredContent"]["reason"] == "declined"
