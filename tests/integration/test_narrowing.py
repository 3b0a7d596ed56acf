"""MCP_ENABLED_TOOLS: only the named tools; prompts and resources empty and not advertised.

Narrowing is decided from ``Settings`` alone, so most of these tests build the server in this
process (``harness.in_process``: ``build_server`` and the SDK's in-memory client, ``mcp.Client``
given the server object): the same handlers and the same protocol, no subprocess. One smoke
test per transport runs the real ``skill-mcp serve`` (the ``connect`` fixture: stdio and HTTP),
so the variable is also proven to reach the server through the environment.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from skill_mcp.config import load_settings
from skill_mcp.server import build_server
from tests.integration.harness import Connect, handshake, in_process, skills_list

pytestmark = pytest.mark.anyio

NARROW = {"MCP_ENABLED_TOOLS": "skill_list, skill_file"}


async def test_narrowed_server_registers_only_the_named_tools(connect: Connect, skills_root: Path) -> None:
    # The subprocess smoke, once per transport: the environment variable reaches `skill-mcp serve`.
    async with connect(skills_root, "legacy", NARROW) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["skill_file", "skill_list"]
        listed = await client.call_tool("skill_list", {})
        assert not listed.is_error and listed.structured_content["total"] == 4
        with pytest.raises(MCPError):
            await client.call_tool("skill_load", {"name": "alpha"})


async def test_narrowed_server_registers_only_the_named_tools_in_each_era(skills_root: Path, era: str) -> None:
    async with in_process(skills_root, era, NARROW) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["skill_file", "skill_list"]
        with pytest.raises(MCPError):
            await client.call_tool("skill_load", {"name": "alpha"})


async def test_narrowed_server_hides_prompts_resources_and_the_skills_extension(skills_root: Path, era: str) -> None:
    async with in_process(skills_root, era, NARROW) as client:
        caps, _ = await handshake(client, era)
        assert caps.tools is not None
        assert caps.prompts is None and caps.resources is None and caps.extensions is None
        assert (await client.list_prompts()).prompts == []
        assert (await client.list_resources()).resources == []
        with pytest.raises(MCPError) as err:
            await client.read_resource("skill://alpha/SKILL.md")
        assert err.value.code == -32602
        with pytest.raises(MCPError) as err:
            await skills_list(client)
        assert err.value.code == -32601


async def test_unnarrowed_control_serves_prompts_and_resources(skills_root: Path, era: str) -> None:
    async with in_process(skills_root, era) as client:
        caps, _ = await handshake(client, era)
        assert caps.prompts is not None and caps.resources is not None
        assert (await client.list_prompts()).prompts
        assert (await client.list_resources()).resources
        assert (await skills_list(client))["skills"]


def _narrowing_warnings(root: Path, value: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    """The server's warnings about MCP_ENABLED_TOOLS while it is built (message and the tool named)."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="skill_mcp"):
        build_server(load_settings([str(root)], {"MCP_ENABLED_TOOLS": value}))
    return [
        json.dumps({"msg": r.getMessage(), "tool": getattr(r, "tool", None)})
        for r in caplog.records
        if "MCP_ENABLED_TOOLS" in r.getMessage()
    ]


@pytest.mark.parametrize(
    ("value", "said"), [("", "is set but empty"), (" , ", "is set but empty"), ("skill-list,skil_load", "skil_load")]
)
async def test_a_narrowing_that_leaves_no_tool_says_so_once_on_stderr_and_in_the_instructions(
    skills_root: Path, era: str, value: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with in_process(skills_root, era, {"MCP_ENABLED_TOOLS": value}) as client:
        assert (await client.list_tools()).tools == []
        _, instructions = await handshake(client, era)
        assert instructions is not None and "MCP_ENABLED_TOOLS" in instructions and said in instructions
    (warning,) = _narrowing_warnings(skills_root, value, caplog)
    assert said in warning and "skill_list" in warning  # names what it could be


def test_a_narrowing_that_keeps_a_tool_gives_no_nothing_offered_warning(
    skills_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert _narrowing_warnings(skills_root, "skill_list", caplog) == []
    (unknown,) = _narrowing_warnings(skills_root, "skill_list,skil_load", caplog)  # the per-name warning stays
    assert "offers no tools" not in unknown and "skil_load" in unknown
