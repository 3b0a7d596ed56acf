"""``serve --watch``: an SDK client sees a new skill and a removed skill without reconnecting.

The real server runs as a subprocess (``skill-mcp serve --watch``); the SDK's own client talks
to it over stdio, in both protocol eras. Every wait is bounded by ``fail_after``; nothing
sleeps to let things settle - the test waits for the server's change notification.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.helpers import write_skill
from tests.serve import stdio_params

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
WAIT_S = 30


def _params(root: Path) -> StdioServerParameters:
    return stdio_params([root], {"PATH": "/usr/bin:/bin"}, options=["--watch"])


async def _names(client: Client) -> set[str]:
    result = await client.call_tool("skill_list", {})
    assert result.structured_content is not None
    return {s["name"] for s in result.structured_content["skills"]}


async def test_handshake_era_client_is_notified_of_a_new_and_a_removed_skill(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "alpha", description="Alpha does the first thing. Use when testing reload.", atomic=True)
    all_three = {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    }
    seen: set[str] = set()
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        note = getattr(message, "root", message)
        if isinstance(
            note,
            types.ToolListChangedNotification
            | types.PromptListChangedNotification
            | types.ResourceListChangedNotification,
        ):
            seen.add(note.method)
            if seen >= all_three:
                changed.set()

    async with Client(_params(root), mode="legacy", message_handler=on_message) as client:
        caps = client.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed is True
        assert caps.prompts is not None and caps.prompts.list_changed is True
        assert await _names(client) == {"alpha"}
        assert {p.name for p in (await client.list_prompts()).prompts} == {"alpha"}

        write_skill(root, "beta", description="Beta does the second thing. Use when testing reload.", atomic=True)
        with anyio.fail_after(WAIT_S):
            await changed.wait()
        assert await _names(client) == {"alpha", "beta"}
        assert {p.name for p in (await client.list_prompts()).prompts} == {"alpha", "beta"}

        changed = anyio.Event()
        seen.clear()
        shutil.rmtree(root / "alpha")
        with anyio.fail_after(WAIT_S):
            await changed.wait()
        assert await _names(client) == {"beta"}
        assert {p.name for p in (await client.list_prompts()).prompts} == {"beta"}


async def test_2026_era_client_hears_changes_on_its_listen_stream(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "alpha", description="Alpha does the first thing. Use when testing reload.", atomic=True)
    async with Client(_params(root), mode="2026-07-28") as client:
        assert await _names(client) == {"alpha"}
        async with client.listen(
            tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
        ) as sub:
            write_skill(root, "beta", description="Beta does the second thing. Use when testing reload.", atomic=True)
            with anyio.fail_after(WAIT_S):
                event = await sub.__anext__()
            assert type(event).__name__ in {"ToolsListChanged", "PromptsListChanged", "ResourcesListChanged"}
            assert await _names(client) == {"alpha", "beta"}
            shutil.rmtree(root / "alpha")
            with anyio.fail_after(WAIT_S):
                while await _names(client) != {"beta"}:
                    await sub.__anext__()


async def test_a_half_written_skill_md_keeps_the_last_good_version_served(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "alpha", description="Alpha does the first thing. Use when testing reload.", atomic=True)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            changed.set()

    async with Client(_params(root), mode="legacy", message_handler=on_message) as client:
        assert await _names(client) == {"alpha"}  # alpha's good version is what is served
        # A truncated SKILL.md (the frontmatter is not closed yet) plus a new neighbour, so the
        # test has a notification to wait for.
        (root / "alpha" / "SKILL.md").write_text("---\nname: alpha\ndescri", encoding="utf-8")
        write_skill(root, "beta", description="Beta does the second thing. Use when testing reload.", atomic=True)
        with anyio.fail_after(WAIT_S):
            await changed.wait()
        result = await client.call_tool("skill_list", {})
        data = result.structured_content
        assert data is not None
        assert {s["name"] for s in data["skills"]} == {"alpha", "beta"}
        assert any(p["reason"] == "reload-kept-previous" and p.get("skill") == "alpha" for p in data["problems"])
