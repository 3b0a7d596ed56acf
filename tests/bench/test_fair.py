"""The same-size floor answers exactly what our server answered, and nothing it was not shown.

Real processes on both sides: our server and ``bench/floor.py --replay`` over stdio, driven by
the SDK's client. The ratio the read-side target uses is only fair if the floor's answer is
byte for byte ours; these tests hold it to that, on the SDK's transport and on ours.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from bench import fair, firstanswer
from bench.corpus import generate
from bench.servers import ours_spec, session

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _requests(name: str) -> dict[str, fair.RequestAt]:
    uri = f"skill://{name}/SKILL.md"
    return {
        "list": lambda i: ("tools/call", {"name": "skill_list", "arguments": {}}),
        "load": lambda i: ("tools/call", {"name": "skill_load", "arguments": {"name": name}}),
        "page": lambda i: ("skills/list", {"cursor": None}),
        "get": lambda i: ("skills/get", {"uri": uri}),
        "read": lambda i: ("resources/read", {"uri": uri}),
    }


@pytest.mark.parametrize("our_transport", [False, True])
def test_replaying_floor_answers_our_exact_bytes(tmp_path: Path, our_transport: bool) -> None:
    corpus = generate(tmp_path / "corpus", 30)
    requests = _requests(corpus.sample[0])

    async def go() -> None:
        async with session(ours_spec("ours", corpus.root)) as ours:
            answers = await fair.record(ours.client, requests, 1, tmp_path / "answers.json")
            async with session(fair.replay_spec(answers, our_transport)) as floor:
                tools = await floor.client.list_tools()
                assert [t.name for t in tools.tools] == [t.name for t in (await ours.client.list_tools()).tools]
                for request_at in requests.values():
                    method, params = request_at(0)
                    mine = await fair.raw(ours.client, method, params)
                    assert mine and await fair.raw(floor.client, method, params) == mine
                    # Through the client's own calls too, as the benchmark issues them.
                    assert await fair.send(floor.client, request_at(0)) == await fair.send(ours.client, request_at(0))

    anyio.run(go)


def test_replaying_floor_refuses_a_request_it_was_not_shown(tmp_path: Path) -> None:
    corpus = generate(tmp_path / "corpus", 10)
    requests = _requests(corpus.sample[0])

    async def go() -> None:
        async with session(ours_spec("ours", corpus.root)) as ours:
            answers = await fair.record(ours.client, requests, 1, tmp_path / "answers.json")
        async with session(fair.replay_spec(answers)) as floor:
            await fair.send(floor.client, requests["get"](0))  # positive control
            with pytest.raises(MCPError):
                await fair.send(floor.client, ("tools/call", {"name": "skill_list", "arguments": {"limit": 3}}))

    anyio.run(go)


def test_replaying_floor_walks_our_exact_pages(tmp_path: Path) -> None:
    """The first-answer floor: ``tools/list`` and every ``skill_list`` page of 200, replayed byte for byte."""
    corpus = generate(tmp_path / "corpus", 230)  # two pages of 200

    async def go() -> None:
        answers = tmp_path / "pages.json"
        async with session(ours_spec("ours", corpus.root)) as ours:
            assert await firstanswer.record_walk(ours.client, answers) > 0
            load = tmp_path / "pages.load"
            async with session(firstanswer.replay_floor_spec(answers, load)) as floor:
                assert float(load.read_text(encoding="ascii")) > 0  # what the floor's ready has taken out
                assert await fair.raw(floor.client, "tools/list", {}) == await fair.raw(ours.client, "tools/list", {})
                assert await firstanswer.walk(floor.client) == await firstanswer.walk(ours.client) == (230, 2)
                cursor = None
                for _ in range(2):
                    params = {"name": "skill_list", "arguments": firstanswer.page_args(cursor)}
                    mine = await fair.raw(ours.client, "tools/call", params)
                    assert await fair.raw(floor.client, "tools/call", params) == mine
                    cursor = mine["structuredContent"].get("nextCursor")
                assert cursor is None

    anyio.run(go)


def test_wait_idle_waits_for_a_busy_process_and_not_for_an_idle_one() -> None:
    """The per-call rounds start once our server's background work is done (``fair.wait_idle``)."""
    import subprocess
    import sys

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:

        async def go() -> tuple[float, float, float]:
            return (
                await fair.wait_idle(None),
                await fair.wait_idle(idle.pid, window_s=0.2, timeout_s=5.0),
                await fair.wait_idle(busy.pid, window_s=0.2, timeout_s=1.0),
            )

        none, quiet, spinning = anyio.run(go)
    finally:
        busy.kill()
        idle.kill()
        busy.wait()
        idle.wait()
    assert none == 0.0
    assert quiet < 5.0  # it returned before its bound: the idle process was seen idle
    assert spinning >= 1.0  # it waited out its bound: a spinning process is never idle
