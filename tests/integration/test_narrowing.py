"""MCP_ENABLED_TOOLS: only the named tools; prompts and resources empty and not advertised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.integration.harness import Connect, RawServer, handshake, skills_list

pytestmark = pytest.mark.anyio

NARROW = {"MCP_ENABLED_TOOLS": "skill_list, skill_file"}


async def test_narrowed_server_registers_only_the_named_tools(connect: Connect, skills_root: Path, era: str) -> None:
    async with connect(skills_root, era, NARROW) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["skill_file", "skill_list"]
        listed = await client.call_tool("skill_list", {})
        assert not listed.is_error and listed.structured_content["total"] == 4
        with pytest.raises(MCPError):
            await client.call_tool("skill_load", {"name": "alpha"})


async def test_narrowed_server_hides_prompts_resources_and_the_skills_extension(
    connect: Connect, skills_root: Path, era: str
) -> None:
    async with connect(skills_root, era, NARROW) as client:
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


async def test_unnarrowed_control_serves_prompts_and_resources(connect: Connect, skills_root: Path, era: str) -> None:
    async with connect(skills_root, era) as client:
        assert (await client.list_prompts()).prompts
        assert (await client.list_resources()).resources
        assert (await skills_list(client))["skills"]


def _narrowing_warnings(root: Path, value: str) -> list[dict[str, object]]:
    """The server's stderr lines about MCP_ENABLED_TOOLS after one handshake and tools/list."""
    server = RawServer(root, {"MCP_ENABLED_TOOLS": value, "SKILL_MCP_LOG": "warning"})
    server.initialize()
    server.request(2, "tools/list")
    assert json.loads(server.read_line())["id"] == 2
    _, err = server.close()
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    return [line for line in lines if "MCP_ENABLED_TOOLS" in str(line.get("msg", line))]


@pytest.mark.parametrize(("value", "said"), [("", "is set but empty"), (" , ", "is set but empty"),
                                              ("skill-list,skil_load", "skil_load")])
async def test_a_narrowing_that_leaves_no_tool_says_so_once_on_stderr_and_in_the_instructions(
    connect: Connect, skills_root: Path, era: str, value: str, said: str
) -> None:
    async with connect(skills_root, era, {"MCP_ENABLED_TOOLS": value}) as client:
        assert (await client.list_tools()).tools == []
        _, instructions = await handshake(client, era)
        assert instructions is not None and "MCP_ENABLED_TOOLS" in instructions and said in instructions
    (warning,) = _narrowing_warnings(skills_root, value)
    assert said in json.dumps(warning) and "skill_list" in json.dumps(warning)  # names what it could be


def test_a_narrowing_that_keeps_a_tool_gives_no_nothing_offered_warning(skills_root: Path) -> None:
    assert _narrowing_warnings(skills_root, "skill_list") == []
    (unknown,) = _narrowing_warnings(skills_root, "skill_list,skil_load")  # the per-name warning stays
    assert "offers no tools" not in json.dumps(unknown)
