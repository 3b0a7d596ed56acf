"""The MCP Inspector CLI (a host's own client) sees a run's files as resource links and reads them.

2026-07-28 era over HTTP: each Inspector command is its own connection and there are no
sessions, so the preview's token and the run id carry from one command to the next.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.harness import HttpServer, running_http_server
from tests.verifiers.judges import INSPECTOR, NODE, inspector_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
TOKEN = "inspector-outputs-token-0123456789abcdef"
ARGS = {"skill": "write-a-run-report", "script": "scripts/report.py"}


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    with running_http_server([], token=TOKEN, env={"MCP_CONFIRM_ELICITATION": "off"}) as srv:
        yield srv


def _inspector(server: HttpServer, *args: str) -> dict[str, Any]:
    inspector_or_skip()
    home = Path(tempfile.mkdtemp(prefix="inspector-home-"))
    try:
        argv = [
            str(NODE),
            str(INSPECTOR),
            "--transport",
            "http",
            "--server-url",
            server.url,
            "--header",
            f"Authorization: Bearer {TOKEN}",
            "--protocol-era",
            "modern",
            *args,
        ]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "NO_COLOR": "1", "LANG": "C.UTF-8"}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout[done.stdout.index("{") :])


def test_the_inspector_shows_a_runs_files_as_resource_links_and_reads_them(server: HttpServer) -> None:
    tool = [
        "--method",
        "tools/call",
        "--tool-name",
        "skill_run",
        "--tool-arg",
        *[f"{k}={v}" for k, v in ARGS.items()],
        'args=["apples=3"]',
    ]
    preview = _inspector(server, *tool)
    token = preview["structuredContent"]["confirmToken"]
    ran = _inspector(server, *tool, f"confirmToken={token}")
    links = [c for c in ran["content"] if c.get("type") == "resource_link"]
    assert {link["name"] for link in links} == {"report.md", "table.csv"}
    assert all(link["uri"].startswith("skill-run://") for link in links)
    table = next(link for link in links if link["name"] == "table.csv")
    read = _inspector(server, "--method", "resources/read", "--uri", table["uri"])
    assert read["contents"][0]["text"].splitlines() == ["name,value", "apples,3"]
