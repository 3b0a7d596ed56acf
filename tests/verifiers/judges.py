"""The hosts' own Skills-extension verifiers, run against a real server.

* The MCP Inspector CLI (``@modelcontextprotocol/inspector``, pinned in
  tools/verifiers/package-lock.json, on the Node 22 that package brings): ``--method skills/list
  --verify`` checks every entry against SEP-2640 and the Agent Skills rules, reads every listed
  file and compares its size and digest, and compares the served SKILL.md's frontmatter field by
  field (YAML 1.2, the ``yaml`` package). Exit 0 only when every skill verifies.
* FastMCP's client (``fastmcp``, pinned in the dev extras): ``list_skills()`` validates every
  entry (one bad entry fails the whole call), ``get_skill()`` each one, and ``read_skill()``
  reads every file, checks size and digest, and compares the frontmatter it parses with PyYAML's
  safe loader (YAML 1.1) against the entry.

Without the Node toolchain (``.ci/setup.d/node.sh``) the Inspector tests skip locally and fail
under CI.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pytest

from tests.serve import serve_argv

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "verifiers"
NODE = TOOLS / "node_modules" / ".bin" / "node"
INSPECTOR = TOOLS / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "cli" / "build" / "index.js"
INSPECTOR_TIMEOUT = 300


def inspector_or_skip() -> None:
    if NODE.exists() and INSPECTOR.exists():
        return
    message = "Inspector toolchain missing: run .ci/setup.d/node.sh (npm ci in tools/verifiers)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class Verdict:
    returncode: int
    reports: list[dict[str, Any]]  # one per skill, as the Inspector prints them
    stdout: str
    stderr: str

    def failures(self) -> list[tuple[Any, Any, Any, Any]]:
        return [
            (r.get("uri"), r.get("outcome"), r.get("conformance"), r.get("frontmatter"))
            for r in self.reports
            if not r.get("ok")
        ]


def inspector_verify(target: Sequence[str], work: Path, *, era: str) -> Verdict:
    """``inspector --cli --method skills/list --verify`` against ``target`` (a command, or
    ``["--transport", "http", "--server-url", url]``), on the ``era`` it negotiates."""
    inspector_or_skip()
    home = work / "inspector-home"
    home.mkdir(exist_ok=True)
    argv = [str(NODE), str(INSPECTOR), "--method", "skills/list", "--verify", "--format", "json", "--protocol-era", era]
    argv += list(target) if target[0].startswith("--") else ["--", *target]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "NO_COLOR": "1",
        "SKILL_MCP_LOG": "warning",
        "LANG": "C.UTF-8",
    }
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=INSPECTOR_TIMEOUT, env=env, cwd=work, check=False
    )
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return Verdict(done.returncode, reports, done.stdout, done.stderr)


async def fastmcp_check(target: Any) -> dict[str, str]:
    """``list_skills()``, then ``get_skill()`` and ``read_skill()`` for every listed skill.

    ``target`` is a FastMCP transport or a URL. Returns ``{uri: name read}``; any verifier
    error propagates, which fails the calling test with FastMCP's own message.
    """
    from fastmcp import Client
    from fastmcp.skills.client import SkillsClientExtension

    out: dict[str, str] = {}
    async with Client(target, extensions=[SkillsClientExtension()], timeout=120) as client:
        for entry in await client.list_skills():
            got = await client.get_skill(entry.uri)
            assert got.uri == entry.uri
            skill = await client.read_skill(entry.uri)
            out[entry.uri] = skill.name
    return out


def stdio_transport(roots: Sequence[Path], log: Path | TextIO) -> Any:
    from fastmcp.client.transports import StdioTransport

    argv = serve_argv(roots)
    return StdioTransport(
        argv[0],
        argv[1:],
        env={"SKILL_MCP_LOG": "warning", "LANG": "C.UTF-8", "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        log_file=log,
    )
