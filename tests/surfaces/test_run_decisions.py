"""``skill_run`` prepares (resolves and hashes) the script once per decision, in both eras.

A real in-process server and the SDK's own client; the runner is the real one, counting the
calls to ``prepare``. The 2026-07-28 retry carries the accepted elicitation and its
``requestState``: that retry is one decision, so one ``prepare``; the first call, which asks,
is another. The handshake era asks mid-call and rebuilds the plan after the user answered
(an edit while the prompt was open must be caught), so it prepares twice within one call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.runner.core import Runner
from skill_mcp.runner.harden import HardenReport
from skill_mcp.runner.plan import Prepared
from skill_mcp.server import build_server
from skill_mcp.surfaces.run_tool import run_tool_spec
from tests.demo_skill import Marker, demo_root, records_log

pytestmark = pytest.mark.anyio


class CountingRunner(Runner):
    """The real runner; ``prepare`` also records that it was called."""

    def prepare(self, catalog: Any, skill: str, script: str, args: Any) -> Prepared:
        self.__dict__.setdefault("calls", []).append(script)
        return Runner.prepare(self, catalog, skill, script, args)


@pytest.fixture(scope="module")
def skills() -> Iterator[Path]:
    with demo_root("skill-mcp-decisions-") as root:
        yield root


def _server(root: Path) -> tuple[Any, CountingRunner]:
    grant = json.dumps([{"skill": "demo", "script": "scripts/echo.py"}])
    settings = load_settings([str(root)], {"PATH": "/usr/bin:/bin", "MCP_SKILL_RUN": grant})
    catalog = build_catalog(settings)
    records: list[Mapping[str, Any]] = []
    runner = CountingRunner.create(settings, harden=HardenReport(True, True), audit=records.append)
    runner.__dict__["records"] = records
    assert isinstance(runner, CountingRunner)
    server = build_server(
        settings, lambda: catalog, tools=[run_tool_spec(runner)], script_states=runner.states(lambda: catalog)
    )
    return server, runner


async def _accept(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.parametrize(("era", "prepares"), [("2026-07-28", 2), ("legacy", 2)])
async def test_an_accepted_confirmation_prepares_once_per_decision(skills: Path, era: str, prepares: int) -> None:
    server, runner = _server(skills)
    mark = Marker(records_log(runner.__dict__["records"]), str(skills / "out" / f"decisions-{era}"))
    async with Client(server, mode=era, elicitation_callback=_accept) as client:  # type: ignore[arg-type]
        result = await client.call_tool(
            "skill_run", {"skill": "demo", "script": "scripts/echo.py", "args": [str(mark), "x"]}
        )
    out = dict(result.structured_content or {})
    assert not result.is_error and out["status"] == "ok" and json.loads(out["stdout"]) == ["x"], out
    assert mark.read_text() == "ran\n"  # positive control: the confirmed run happened, once
    # 2026-07-28: the asking call and the retry, one each. Handshake: before and after the prompt.
    assert runner.__dict__["calls"] == ["scripts/echo.py"] * prepares


async def test_the_token_flow_prepares_once_per_call(skills: Path) -> None:
    server, runner = _server(skills)
    args = {"skill": "demo", "script": "scripts/echo.py", "args": [str(skills / "out" / "decisions-token"), "y"]}
    async with Client(server, mode="legacy") as client:
        answer = await client.call_tool("skill_run", args)
        first = dict(answer.structured_content or {})
        assert "status" in first, answer
        assert first["status"] == "confirmation-required" and first["howToConfirm"].startswith("call skill_run again")
        done = await client.call_tool("skill_run", {**args, "confirmToken": first["confirmToken"]})
    assert dict(done.structured_content or {})["status"] == "ok"
    assert runner.__dict__["calls"] == ["scripts/echo.py"] * 2
