"""SIGTERM over HTTP: calls in flight finish or are answered within a bound; no script outlives it.

The skill's declared script sleeps for as long as it is told; its first argument is a marker
unique to the test, so the script's processes can be found in /proc without any cooperation
from the server. Bounds: drain 2 s (set for the test), the stop-hook wait and uvicorn's own
3 s, plus slack for a loaded machine.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.helpers import pids_with
from tests.http.harness import HttpServer, http_client, running_http_server

TOKEN = "shutdown-token-0123456789abcdef"
DRAIN = 2.0
EXIT_BOUND = DRAIN + 3.0 + 3.0 + 10.0

SLEEPER_MD = """---
name: sleeper
description: Sleeps for a while, to test what happens to a call in flight.
mcp-host:
  version: 1
  run:
    - script: scripts/sleep.py
      interpreter: python
      timeout: 120
---

Run scripts/sleep.py MARKER SECONDS.
"""
SLEEP_PY = "import sys, time\ntime.sleep(float(sys.argv[2]))\nprint('slept', sys.argv[2])\n"

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture()
def root() -> Iterator[Path]:
    """World-readable: a root server drops scripts to ``nobody``, who cannot enter pytest's tmp."""
    path = Path(tempfile.mkdtemp(prefix="skill-mcp-http-"))
    os.chmod(path, 0o755)
    skill = path / "sleeper"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SLEEPER_MD, encoding="utf-8")
    (skill / "scripts" / "sleep.py").write_text(SLEEP_PY, encoding="utf-8")
    for p in [skill, skill / "scripts"]:
        os.chmod(p, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _wait(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def _run_script(client: Any, marker: str, seconds: float) -> dict[str, Any]:
    """skill_run with the token round trip (this client declares no elicitation)."""
    args = {"skill": "sleeper", "script": "scripts/sleep.py", "args": [marker, str(seconds)]}
    first = await client.call_tool("skill_run", args)
    preview = first.structured_content
    assert preview is not None and preview.get("status") == "confirmation-required", preview
    second = await client.call_tool("skill_run", {**args, "confirmToken": preview["confirmToken"]})
    assert second.structured_content is not None, second
    return dict(second.structured_content)


def _terminate_when_running(server: HttpServer, marker: str) -> float:
    assert _wait(lambda: bool(pids_with(marker)), 30), f"the script never started:\n{server.stderr}"
    started = time.monotonic()
    server.terminate(timeout=EXIT_BOUND + 10)
    return time.monotonic() - started


def test_sigterm_with_an_idle_client_connected_exits_zero_within_the_bound(root: Path) -> None:
    async def main(server: HttpServer) -> float:
        async with http_client(server.url, token=TOKEN, mode="legacy") as client:
            await client.list_tools()
            started = time.monotonic()
            code = await anyio.to_thread.run_sync(server.terminate)
            assert code == 0, server.stderr
            return time.monotonic() - started

    with running_http_server([root], token=TOKEN, drain_seconds=DRAIN) as server:
        try:
            took = anyio.run(main, server)
        except Exception:  # the client's own close may fail once the server is gone
            took = 0.0
        assert server.proc.returncode == 0, server.stderr
    assert took < EXIT_BOUND


def test_sigterm_lets_a_call_in_flight_finish_and_refuses_new_work(root: Path) -> None:
    marker = f"m-{uuid.uuid4().hex}"
    result: dict[str, Any] = {}

    async def main(server: HttpServer) -> None:
        async with http_client(server.url, token=TOKEN, mode="legacy") as client:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    result.update(await _run_script(client, marker, 1.5))

                tg.start_soon(call)
                await anyio.to_thread.run_sync(_wait, lambda: bool(pids_with(marker)), 30)
                server.proc.send_signal(15)
                # New work is refused while draining (or the port is already closed).
                await anyio.to_thread.run_sync(_assert_new_session_refused, server)

    with running_http_server([root], token=TOKEN, drain_seconds=10) as server:
        try:
            anyio.run(main, server)
        finally:
            code = server.proc.wait(timeout=EXIT_BOUND + 10)
        assert code == 0, server.stderr
    assert result.get("status") == "ok", result
    assert "slept" in str(result.get("stdout")), result
    assert pids_with(marker) == []


def _assert_new_session_refused(server: HttpServer) -> None:
    init = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}'
    )
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    deadline = time.monotonic() + 5
    while True:
        try:
            with httpx2.Client(timeout=5) as http:
                response = http.post(server.url, headers=headers, content=init)
        except httpx2.TransportError:
            return  # listener closed: refused
        if response.status_code == 503:
            assert response.json()["error"]["data"]["reason"] == "http-draining"
            return
        # The signal may not have been handled yet: the request got through before the drain.
        assert time.monotonic() < deadline, f"a new session was accepted during the drain: {response.status_code}"
        time.sleep(0.05)


def _long_call_then_sigterm(root: Path, *, stop_hooks: bool) -> tuple[float, dict[str, Any], str]:
    marker = f"m-{uuid.uuid4().hex}"
    outcome: dict[str, Any] = {}

    async def main(server: HttpServer) -> float:
        async with http_client(server.url, token=TOKEN, mode="legacy") as client:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    try:
                        outcome["result"] = await _run_script(client, marker, 100)
                    except Exception as exc:  # a drain-cut call's JSON-RPC error arrives as MCPError
                        outcome["error"] = repr(exc)

                tg.start_soon(call)
                return await anyio.to_thread.run_sync(_terminate_when_running, server, marker)
        raise AssertionError("unreachable")

    with running_http_server([root], token=TOKEN, drain_seconds=DRAIN, stop_hooks=stop_hooks) as server:
        try:
            took = anyio.run(main, server)
        except Exception:
            took = EXIT_BOUND  # the client's close raced the server's exit; the bound is checked below
        assert server.proc.wait(timeout=EXIT_BOUND + 10) == 0, server.stderr
    assert _wait(lambda: pids_with(marker) == [], 10), "a script outlived the server"
    return took, outcome, server.stderr


def test_sigterm_during_a_long_call_answers_it_within_the_bound_and_leaves_no_script(root: Path) -> None:
    took, outcome, stderr = _long_call_then_sigterm(root, stop_hooks=True)
    assert took <= EXIT_BOUND
    # Answered, not cut: the runner's stop hook ended the script, so the call returned its
    # normal result (a killed run), well before the drain would have had to cut it.
    assert outcome.get("result", {}).get("status") == "killed", (outcome, stderr[-3000:])


def test_a_call_no_stop_hook_ends_is_answered_with_http_draining_and_its_script_dies(root: Path) -> None:
    took, outcome, stderr = _long_call_then_sigterm(root, stop_hooks=False)
    assert took <= EXIT_BOUND
    assert "http-draining" in outcome.get("error", ""), (outcome, stderr[-3000:])


def test_a_confirmation_answered_during_the_drain_still_reaches_its_call(root: Path) -> None:
    """The elicitation answer is a new POST in the call's session: the drain must let it through."""
    marker = f"m-{uuid.uuid4().hex}"
    seen: dict[str, Any] = {}

    async def main(server: HttpServer) -> None:
        async def confirm(ctx: Any, params: Any) -> Any:
            import mcp_types as types

            server.proc.send_signal(15)
            # Wait until the drain is on (a new session is refused), then answer.
            await anyio.to_thread.run_sync(_assert_new_session_refused, server)
            seen["asked"] = True
            return types.ElicitResult(action="accept", content={"confirm": True})

        async with http_client(server.url, token=TOKEN, mode="legacy", elicitation_callback=confirm) as client:
            # The SDK client lists tools to validate a result; do it now, not during the drain.
            await client.list_tools()
            result = await client.call_tool(
                "skill_run", {"skill": "sleeper", "script": "scripts/sleep.py", "args": [marker, "0.2"]}
            )
            seen["result"] = result.structured_content

    with running_http_server([root], token=TOKEN, drain_seconds=10) as server:
        try:
            anyio.run(main, server)
        finally:
            code = server.proc.wait(timeout=EXIT_BOUND + 10)
        assert code == 0, server.stderr
    assert seen.get("asked") and seen.get("result", {}).get("status") == "ok", seen
