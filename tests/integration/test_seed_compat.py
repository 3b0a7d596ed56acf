"""What clients of the earlier ``skillmcp`` interface send: its tools, its handshake, its commands.

- ``SKILL_MCP_COMPAT=skillmcp`` offers ``list_packs``, ``search_skills`` and ``get_skill`` with the
  interface's answer shapes, checked through the SDK's client (and its output-schema validation) in
  both eras, on a server built in process (the switch is a Settings decision); without the switch
  they are not offered.
- That interface's literal ``initialize`` (no ``capabilities``, no ``clientInfo``) gets ``-32602`` whose
  ``data`` names what is missing, over stdio and over HTTP (before: ``data: ""``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx2
import pytest

from skill_mcp.config import BUNDLED_ROOT
from tests.helpers import ERAS
from tests.http.harness import running_http_server
from tests.integration.harness import in_process
from tests.serve import serve_argv

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
SEED_TOOLS = {"list_packs", "search_skills", "get_skill"}
COMPAT = {"SKILL_MCP_COMPAT": "skillmcp", "SKILL_MCP_LOG": "warning"}
SEED_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}


@pytest.mark.parametrize("era", ERAS)
async def test_the_skillmcp_profile_offers_the_seeds_three_tools_with_its_shapes(era: str) -> None:
    async with in_process(BUNDLED_ROOT, era, env=COMPAT) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names >= SEED_TOOLS and "skill_list" in names
        found = (await client.call_tool("search_skills", {"query": "stdout purity", "limit": 2})).structured_content
        assert found is not None and set(found) == {"matches", "total"}
        assert found["matches"][0] == "check-stdout-purity" and found["total"] == len(found["matches"]) <= 2
        packs = (await client.call_tool("list_packs", {})).structured_content
        assert packs is not None and packs["total"] == 1
        (pack,) = packs["packs"]
        assert pack["name"] == "skill-mcp-bundled" and pack["count"] == 51 and "govern" in pack["phases"]
        skill = (await client.call_tool("get_skill", {"name": "check-stdout-purity"})).structured_content
        assert skill is not None and skill["uri"] == "skill://check-stdout-purity/SKILL.md"
        assert skill["phase"] == "verify" and skill["markdown"].lstrip().startswith("#")
        unknown = await client.call_tool("get_skill", {"name": "protocol-conformance-test"})
        assert unknown.is_error and (unknown.structured_content or {})["reason"] == "unknown-skill"


async def test_without_the_switch_the_seed_tools_are_not_offered() -> None:
    async with in_process(BUNDLED_ROOT, "legacy", env={"SKILL_MCP_LOG": "warning"}) as client:
        assert not SEED_TOOLS & {t.name for t in (await client.list_tools()).tools}


async def test_an_unknown_profile_offers_nothing_extra() -> None:
    async with in_process(
        BUNDLED_ROOT, "legacy", env={"SKILL_MCP_COMPAT": "nope", "SKILL_MCP_LOG": "warning"}
    ) as client:
        assert not SEED_TOOLS & {t.name for t in (await client.list_tools()).tools}


def _check_refusal(error: dict[str, object]) -> None:
    assert error["code"] == -32602
    data = error["data"]
    assert isinstance(data, dict)
    assert data["reason"] == "invalid-initialize"
    assert data["missing"] == ["capabilities", "clientInfo"]
    assert "clientInfo" in str(data["detail"])


@pytest.mark.slow  # the server subprocess: what the transport answers
def test_the_seeds_literal_initialize_is_told_what_is_missing_over_stdio() -> None:
    lines = [
        json.dumps(SEED_INITIALIZE),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "seed", "version": "1"},
                },
            }
        ),
    ]
    done = subprocess.run(
        serve_argv(),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"SKILL_MCP_LOG": "warning"},
    )
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    _check_refusal(answers[1]["error"])
    assert answers[2]["result"]["serverInfo"]["name"]  # the completed handshake still works


@pytest.mark.slow  # the server subprocess: what the transport answers
def test_the_seeds_literal_initialize_is_told_what_is_missing_over_http(tmp_path: Path) -> None:
    with running_http_server([BUNDLED_ROOT], no_auth=True) as server:
        response = httpx2.post(
            server.url, json=SEED_INITIALIZE, timeout=30, headers={"Accept": "application/json, text/event-stream"}
        )
    body = response.text
    payload = (
        json.loads(body)
        if body.lstrip().startswith("{")
        else json.loads(next(line[5:] for line in body.splitlines() if line.startswith("data:")))
    )
    _check_refusal(payload["error"])
