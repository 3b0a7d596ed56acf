"""``serve --watch --http``: every connected client hears about a new skill, over HTTP.

Two handshake-era clients at once (each its own SDK session on the one server) must both get
the list_changed notifications; a 2026-07-28 client hears it on its subscriptions/listen
stream. Every wait is bounded by ``fail_after``; nothing sleeps to let things settle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.helpers import write_skill
from tests.http.harness import http_client, running_http_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
TOKEN = "watch-token-0123456789abcdef"
WAIT_S = 30
ALL_THREE = {
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
}


async def _names(client: Any) -> set[str]:
    result = await client.call_tool("skill_list", {})
    assert result.structured_content is not None
    return {s["name"] for s in result.structured_content["skills"]}


class Heard:
    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.all = anyio.Event()

    async def __call__(self, message: Any) -> None:
        note = getattr(message, "root", message)
        if isinstance(
            note,
            types.ToolListChangedNotification
            | types.PromptListChangedNotification
            | types.ResourceListChangedNotification,
        ):
            self.seen.add(note.method)
            if self.seen >= ALL_THREE:
                self.all.set()


@pytest.mark.slow
async def test_every_handshake_era_session_is_told_of_a_new_skill(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "alpha", atomic=True)
    with running_http_server([root], token=TOKEN, watch=True) as server:
        first, second = Heard(), Heard()
        async with (
            http_client(server.url, token=TOKEN, mode="legacy", message_handler=first) as one,
            http_client(server.url, token=TOKEN, mode="legacy", message_handler=second) as two,
        ):
            assert await _names(one) == {"alpha"} and await _names(two) == {"alpha"}
            write_skill(root, "beta", atomic=True)
            with anyio.fail_after(WAIT_S):
                await first.all.wait()
                await second.all.wait()
            assert await _names(one) == {"alpha", "beta"}
            assert await _names(two) == {"alpha", "beta"}


@pytest.mark.slow
async def test_a_2026_era_client_hears_it_on_its_listen_stream(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "alpha", atomic=True)
    with running_http_server([root], token=TOKEN, watch=True) as server:
        async with http_client(server.url, token=TOKEN, mode="2026-07-28") as client:
            assert await _names(client) == {"alpha"}
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as sub:
                write_skill(root, "beta", atomic=True)
                with anyio.fail_after(WAIT_S):
                    event = await sub.__anext__()
                assert type(event).__name__ in {"ToolsListChanged", "PromptsListChanged", "ResourcesListChanged"}
                assert await _names(client) == {"alpha", "beta"}


@pytest.mark.slow
async def test_an_open_listen_stream_does_not_hold_the_drain(tmp_path: Path) -> None:
    """A listen stream is a long POST that carries no call: SIGTERM must not wait for it."""
    import json

    root = tmp_path / "skills"
    write_skill(root, "alpha", atomic=True)
    with running_http_server([root], token=TOKEN, watch=True) as server:
        async with http_client(server.url, token=TOKEN, mode="2026-07-28") as client:
            async with client.listen(tools_list_changed=True) as sub:
                assert sub is not None
                assert await _names(client) == {"alpha"}  # the listen stream is open meanwhile
                code = await anyio.to_thread.run_sync(server.terminate)
        assert code == 0, server.stderr
    drained = [json.loads(line) for line in server.stderr_lines if '"http-drained"' in line]
    assert drained and drained[0]["inFlightAtSignal"] == 0 and drained[0]["drained"] is True, server.stderr
