"""MCP_ENABLED_TOOLS: only the named tools; prompts and resources empty and not advertised."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.integration.harness import Connect, handshake, skills_list

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
