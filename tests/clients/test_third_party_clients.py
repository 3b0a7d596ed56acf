"""Third-party MCP clients against the real server, each from its own venv (conftest.py).

FastMCP's client (4.2, over stdio and HTTP) keeps one session and answers the confirmation by
elicitation; langchain-mcp-adapters (0.3, over stdio) starts a new server for every tool call,
its default, so ``skill_run``'s token round trip cannot complete and must say why
(``TOKEN_INVALID`` from another server process, with the fix). Each lists, loads, reads,
searches and gets to a ``skill_run`` outcome; what the model would be handed holds each file's
text once.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.demo_skill import demo_root
from tests.serve import running_http_server, serve_argv

HERE = Path(__file__).resolve().parent
TOKEN = "third-party-token-0123456789abcdef"
SKILL_MD_LINE = "Run scripts/echo.py."

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the first run makes the client venvs


@pytest.fixture
def skills() -> Iterator[Path]:
    with demo_root("skill-mcp-clients-") as root:
        yield root


def _client(python: Path, script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), str(HERE / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def _serve(root: Path) -> list[str]:
    return serve_argv([root])


def _check_fastmcp(seen: dict[str, Any], skills: Path) -> None:
    assert {"skill_list", "skill_load", "skill_file", "skill_run", "skill_search"} <= set(seen["tools"])
    assert [s["name"] for s in seen["list"]["skills"]] == ["demo"]
    skill_md = (skills / "demo" / "SKILL.md").read_text(encoding="utf-8")
    load = seen["load"]
    assert [b["resource"]["text"] for b in load["content"] if b["type"] == "resource"] == [skill_md]
    assert SKILL_MD_LINE not in json.dumps(load["structured"])  # once: not again in structuredContent
    echo = (skills / "demo" / "scripts" / "echo.py").read_text(encoding="utf-8")
    file = seen["file"]
    assert [b["resource"]["text"] for b in file["content"] if b["type"] == "resource"] == [echo]
    assert file["structured"]["served"] == 1 and "text" not in file["structured"]["files"][0]
    assert seen["resource"] == skill_md
    assert seen["search"]["hits"][0]["name"] == "demo"
    run = seen["run"]
    assert not run["isError"] and run["structured"]["status"] == "ok", run
    assert json.loads(run["structured"]["stdout"]) == ["hi"]
    assert len(seen["prompts"]) == 1 and "scripts/echo.py" in seen["prompts"][0]  # asked once, by elicitation
    # The run's label is its first argument (the sandbox lets a script write nothing outside its
    # run directory, so the result itself is the proof it ran once): ok, and its own output.


def test_fastmcp_client_over_stdio_lists_loads_reads_searches_and_runs(fastmcp_python: Path, skills: Path) -> None:
    seen = _client(fastmcp_python, "fastmcp_client.py", str(skills / "out" / "ran"), "stdio", *_serve(skills))
    _check_fastmcp(seen, skills)


def test_fastmcp_client_over_http_lists_loads_reads_searches_and_runs(fastmcp_python: Path, skills: Path) -> None:
    with running_http_server([skills], token=TOKEN) as srv:
        seen = _client(fastmcp_python, "fastmcp_client.py", str(skills / "out" / "ran"), "http", srv.url, TOKEN)
    log = srv.stderr  # read once the server has stopped: every line it wrote is in
    _check_fastmcp(seen, skills)
    assert '"http-refused"' not in log  # no probe of FastMCP's was answered 401


def test_langchain_adapters_one_server_per_call_read_everything_and_are_told_why_a_token_cannot_confirm(
    langchain_python: Path, skills: Path
) -> None:
    seen = _client(langchain_python, "langchain_client.py", str(skills / "out" / "ran"), *_serve(skills))
    assert {"skill_list", "skill_load", "skill_file", "skill_run", "skill_search"} <= set(seen["tools"])
    assert "demo" in seen["list"]["text"]
    # What the model is handed: SKILL.md and the file verbatim, each once.
    assert seen["load"]["text"].count(SKILL_MD_LINE) == 1 and "name: demo" in seen["load"]["text"]
    echo = (skills / "demo" / "scripts" / "echo.py").read_text(encoding="utf-8")
    assert seen["file"]["text"].count(echo.strip()) == 1
    assert "demo" in seen["search"]["text"]
    assert SKILL_MD_LINE in seen["resource"]
    preview = seen["preview"]
    assert preview["structured"]["status"] == "confirmation-required"
    confirm = seen["confirm"]
    assert confirm["status"] == "error" and "TOKEN_INVALID" in confirm["text"]
    assert "another server process" in confirm["text"] and "elicitation" in confirm["text"]
    assert "exitCode" not in confirm["text"]  # refused before a process started: nothing ran
