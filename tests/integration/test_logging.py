"""logging/setLevel (handshake era): the server's own log lines reach the client that asked."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest

from tests.integration.harness import Connect, handshake

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SET_INFO = types.SetLevelRequest(params=types.SetLevelRequestParams(level="info"))


async def test_a_client_that_sets_a_level_gets_the_servers_log_lines(connect: Connect, skills_root: Path) -> None:
    received: list[types.LoggingMessageNotificationParams] = []
    refused_logged = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)
        if params.logger == "skill_mcp.tools":
            refused_logged.set()

    env = {"SKILL_MCP_LOG": "info"}
    async with connect(skills_root, "legacy", env, logging_callback=on_log) as client:
        caps, _ = await handshake(client, "legacy")
        assert caps.logging is not None
        # Before any logging/setLevel nothing is forwarded: the server has no subscriber yet.
        await client.call_tool("skill_load", {"name": "nope"})
        await client.session.send_request(SET_INFO, types.EmptyResult)
        await client.call_tool("skill_load", {"name": "still-nope"})
        with anyio.fail_after(20):
            await refused_logged.wait()
    tool_lines = [p for p in received if p.logger == "skill_mcp.tools"]
    assert len(tool_lines) == 1
    assert tool_lines[0].level == "info" and tool_lines[0].data == "tool refused"


async def test_the_2026_era_does_not_offer_logging(connect: Connect, skills_root: Path) -> None:
    async with connect(skills_root, "2026-07-28") as client:
        caps, _ = await handshake(client, "2026-07-28")
        assert caps.logging is None and caps.tools is not None
