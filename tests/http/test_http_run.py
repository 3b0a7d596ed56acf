"""skill_run over Streamable HTTP, both eras: the confirmation works exactly as over stdio.

Handshake era: the server asks through elicitation/create on the call's SSE stream and reads
the answer from the client's next POST in the same session. 2026-07-28 era: no session; the
server returns an InputRequiredResult and runs on the client's retry carrying the answer and
the requestState. Without elicitation: the confirmToken round trip. The script's first argument
is a label found in the server's audit lines (``tests.demo_skill.Marker``), so "ran exactly once" and "ran not at all" are facts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.demo_skill import Marker, Prompts, demo_root
from tests.http.harness import HttpServer, http_client, running_http_server

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.timeout(120)]  # slow: an HTTP server subprocess per case
TOKEN = "run-token-0123456789abcdef"


@pytest.fixture(scope="module")
def skills() -> Iterator[Path]:
    with demo_root("skill-mcp-http-run-") as root:
        yield root


@pytest.fixture(scope="module")
def server(skills: Path) -> Iterator[HttpServer]:
    with running_http_server([skills], token=TOKEN) as srv:
        yield srv


@pytest.fixture
def mark(skills: Path, server: HttpServer, request: pytest.FixtureRequest) -> Marker:
    return Marker(lambda: server.stderr, str(skills / "out" / f"{request.node.name}".replace("/", "_")))


async def _run(client: Any, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool("skill_run", arguments)
    assert result.structured_content is not None, result
    return bool(result.is_error), dict(result.structured_content)


async def test_token_round_trip_runs_exactly_once_over_http(server: HttpServer, era: str, mark: Marker) -> None:
    args = {"skill": "demo", "script": "scripts/echo.py", "args": [str(mark), "a b", "$(id)"]}
    async with http_client(server.url, token=TOKEN, mode=era) as client:
        err, first = await _run(client, **args)
        assert not err and first["status"] == "confirmation-required"
        assert not mark.exists()
        err, out = await _run(client, **args, confirmToken=first["confirmToken"])
        assert not err and out["status"] == "ok" and json.loads(out["stdout"]) == ["a b", "$(id)"]
        err, again = await _run(client, **args, confirmToken=first["confirmToken"])
        assert err and again["reason"] == "TOKEN_REUSED"
    assert mark.read_text() == "ran\n"


async def test_elicitation_accept_runs_the_script_over_http(server: HttpServer, era: str, mark: Marker) -> None:
    prompts = Prompts("accept")
    async with http_client(server.url, token=TOKEN, mode=era, elicitation_callback=prompts) as client:
        err, out = await _run(client, skill="demo", script="scripts/echo.py", args=[str(mark), "x"])
    assert not err and out["status"] == "ok" and json.loads(out["stdout"]) == ["x"], out
    assert len(prompts.messages) == 1 and "scripts/echo.py" in prompts.messages[0]
    assert mark.read_text() == "ran\n"


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicitation_decline_runs_nothing_over_http(
    server: HttpServer, era: str, mark: Marker, action: str
) -> None:
    prompts = Prompts(action)
    async with http_client(server.url, token=TOKEN, mode=era, elicitation_callback=prompts) as client:
        err, out = await _run(client, skill="demo", script="scripts/echo.py", args=[str(mark)])
    assert err and out["reason"] == "declined" and prompts.messages
    assert not mark.exists()


async def test_a_confirm_token_is_bound_to_the_plan_not_to_the_connection(
    server: HttpServer, era: str, mark: Marker
) -> None:
    """Tokens bind the plan, not the connection: a second client with the same bearer token is the
    same principal. This pins that (documented in docs/http.md) rather than assuming isolation."""
    args = {"skill": "demo", "script": "scripts/echo.py", "args": [str(mark)]}
    async with http_client(server.url, token=TOKEN, mode=era) as first:
        _, preview = await _run(first, **args)
    async with http_client(server.url, token=TOKEN, mode=era) as second:
        err, out = await _run(second, **args, confirmToken=preview["confirmToken"])
    assert not err and out["status"] == "ok"
    assert mark.read_text() == "ran\n"
