"""Live reload, surfaces side: after a catalog swap, connected clients hear list_changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.server import build_server
from skill_mcp.surfaces.declared_scripts import DeclaredScripts
from tests.helpers import write_skill

pytestmark = pytest.mark.anyio

CHANGED = {
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
}


class Swappable:
    """A catalog provider the test swaps by hand, as a watcher would."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.current: Catalog = build_catalog(settings)

    def __call__(self) -> Catalog:
        return self.current

    def rebuild(self) -> None:
        self.current = build_catalog(self.settings)


def _setup(tmp_path: Path, *, watch: bool) -> tuple[Path, Swappable, Any]:
    root = tmp_path / "skills"
    write_skill(root, "first")
    settings = load_settings([str(root)], {}, watch=watch)
    provider = Swappable(settings)
    return root, provider, build_server(settings, provider, tools=(), script_states=DeclaredScripts(settings))


async def test_a_handshake_era_client_hears_list_changed_and_sees_the_new_skill(tmp_path: Path) -> None:
    root, provider, server = _setup(tmp_path, watch=True)
    heard: set[str] = set()
    all_heard = anyio.Event()

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if method in CHANGED:
            heard.add(method)
            if heard == CHANGED:
                all_heard.set()

    async with Client(server, mode="legacy", message_handler=on_message) as client:
        caps = client.server_capabilities
        assert caps.tools is not None and caps.prompts is not None and caps.resources is not None
        assert caps.tools.list_changed and caps.prompts.list_changed and caps.resources.list_changed
        assert [p.name for p in (await client.list_prompts()).prompts] == ["first"]
        write_skill(root, "second")
        provider.rebuild()
        await server.announcer.announce()
        with anyio.fail_after(10):
            await all_heard.wait()
        assert [p.name for p in (await client.list_prompts()).prompts] == ["first", "second"]


async def test_a_2026_client_listening_gets_the_change_events(tmp_path: Path) -> None:
    root, provider, server = _setup(tmp_path, watch=True)
    async with (
        Client(server, mode="2026-07-28") as client,
        client.listen(tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True) as sub,
    ):
        write_skill(root, "second")
        provider.rebuild()
        await server.announcer.announce()
        with anyio.fail_after(10):
            event = await sub.__anext__()
        assert type(event).__name__ in {"ToolsListChanged", "PromptsListChanged", "ResourcesListChanged"}
        assert [p.name for p in (await client.list_prompts()).prompts] == ["first", "second"]


async def test_without_watch_nothing_is_announced_or_advertised(tmp_path: Path) -> None:
    _, _, server = _setup(tmp_path, watch=False)
    assert server.announcer is None
    async with Client(server, mode="legacy") as client:
        tools = client.server_capabilities.tools
        assert tools is not None and not tools.list_changed
