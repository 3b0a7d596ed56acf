"""skill_run end to end: the real server over stdio, the SDK's own client, both protocol eras.

Confirmation by elicitation (accept, decline, cancel) and by the token round trip with each of
its refusal reasons; the bundled example skill runs out of the box after confirmation.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from skill_mcp.config import load_settings
from skill_mcp.reasons import Refusal
from tests.demo_skill import ECHO, Marker, Prompts, records_log, write_demo
from tests.serve import serve_argv

pytestmark = [pytest.mark.slow, pytest.mark.anyio]  # slow: a server subprocess per case


@pytest.fixture
def skills(root: Path) -> Path:
    return write_demo(root)


# Runs the server with its stderr appended to the file named first: the audit lines Marker reads.
LOGGED = (
    "import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)\n"
    "os.dup2(fd, 2)\nos.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


def server_params(roots: list[Path], env: Mapping[str, str] | None = None) -> StdioServerParameters:
    out = roots[0] / "out"
    args = ["-c", LOGGED, str(out / "server.log")] if out.is_dir() else []
    argv = serve_argv(roots, python=sys.executable)  # the console script, run by the wrapper's interpreter
    return StdioServerParameters(
        command=sys.executable, args=[*args, *argv[1:]], env={"SKILL_MCP_LOG": "warning", **(env or {})}
    )


@asynccontextmanager
async def connect(
    roots: list[Path], era: str, env: Mapping[str, str] | None = None, prompts: Prompts | None = None
) -> AsyncIterator[Client]:
    async with Client(
        server_params(roots, env), mode=era, read_timeout_seconds=60, elicitation_callback=prompts
    ) as client:
        yield client


async def run(client: Client, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool("skill_run", arguments)
    assert result.structured_content is not None
    return bool(result.is_error), dict(result.structured_content)


def marker(skills: Path) -> Marker:
    log = skills / "out" / "server.log"
    return Marker(lambda: log.read_text(encoding="utf-8") if log.exists() else "", str(skills / "out" / "ran"))


async def test_token_flow_runs_once_and_refuses_each_misuse(skills: Path, era: str) -> None:
    mark = str(marker(skills))
    async with connect([skills], era) as client:
        err, first = await run(client, skill="demo", script="scripts/echo.py", args=[mark, "$(id)", ";", "`id`"])
        assert not err and first["status"] == "confirmation-required"
        assert not marker(skills).exists()  # the preview starts no process
        will_run = first["preview"]["willRun"]
        assert will_run["argv"][0].startswith("/") and will_run["argv"][2:] == [mark, "$(id)", ";", "`id`"]
        assert will_run["cwd"] == str((skills / "demo").resolve()) and will_run["scriptDigest"].startswith("sha256:")
        token = first["confirmToken"]

        err, out = await run(client, skill="demo", script="scripts/echo.py", args=[mark, "$(id)"], confirmToken=token)
        assert err and out["reason"] == Refusal.DRAFT_CHANGED
        err, out = await run(
            client,
            skill="demo",
            script="scripts/echo.py",
            args=[mark, "$(id)", ";", "`id`"],
            confirmToken="forged.token",
        )
        assert err and out["reason"] == Refusal.TOKEN_INVALID
        assert not marker(skills).exists()

        err, out = await run(
            client, skill="demo", script="scripts/echo.py", args=[mark, "$(id)", ";", "`id`"], confirmToken=token
        )
        assert not err and out["status"] == "ok" and json.loads(out["stdout"]) == ["$(id)", ";", "`id`"]
        err, out = await run(
            client, skill="demo", script="scripts/echo.py", args=[mark, "$(id)", ";", "`id`"], confirmToken=token
        )
        assert err and out["reason"] == Refusal.TOKEN_REUSED
    assert marker(skills).read_text() == "ran\n"  # exactly once


async def test_a_token_confirmed_in_another_server_process_says_so_and_names_the_fix(skills: Path, era: str) -> None:
    """A client that starts one server per call (langchain-mcp-adapters over stdio by default):
    the preview comes from one process, the confirmation goes to the next."""
    call = {"skill": "demo", "script": "scripts/echo.py", "args": [str(marker(skills))]}
    async with connect([skills], era) as client:
        _, first = await run(client, **call)
    async with connect([skills], era) as client:
        err, out = await run(client, **call, confirmToken=first["confirmToken"])
        assert err and out["reason"] == Refusal.TOKEN_INVALID == "TOKEN_INVALID"
        assert out["mintedBy"] == "another-process"
        assert "another server process" in out["detail"]
        assert "one session with one server process" in out["detail"] and "elicitation" in out["detail"]
        # Positive control: a token this process minted runs, and a mangled one is only "malformed".
        _, again = await run(client, **call)
        err, out = await run(client, **call, confirmToken=again["confirmToken"] + "x")
        assert err and out["reason"] == Refusal.TOKEN_INVALID and "another-process" not in json.dumps(out)
        err, out = await run(client, **call, confirmToken=again["confirmToken"])
        assert not err and out["status"] == "ok"
    assert marker(skills).read_text() == "ran\n"  # the one run, in the process that minted its token


async def test_a_script_changed_between_preview_and_run_is_refused(skills: Path, era: str) -> None:
    async with connect([skills], era) as client:
        _, first = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills))])
        (skills / "demo" / "scripts" / "echo.py").write_text(ECHO + "print('changed')\n", encoding="utf-8")
        err, out = await run(
            client,
            skill="demo",
            script="scripts/echo.py",
            args=[str(marker(skills))],
            confirmToken=first["confirmToken"],
        )
        assert err and out["reason"] == Refusal.DRAFT_CHANGED
    assert not marker(skills).exists()


async def test_elicitation_accept_runs_the_script(skills: Path, era: str) -> None:
    prompts = Prompts("accept")
    async with connect([skills], era, prompts=prompts) as client:
        err, out = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills)), "x"])
    assert not err and out["status"] == "ok" and json.loads(out["stdout"]) == ["x"]
    assert len(prompts.messages) == 1 and "scripts/echo.py" in prompts.messages[0] and "sha256:" in prompts.messages[0]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicitation_decline_or_cancel_runs_nothing(skills: Path, era: str, action: str) -> None:
    prompts = Prompts(action)
    async with connect([skills], era, prompts=prompts) as client:
        err, out = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills))])
    assert err and out["reason"] == Refusal.DECLINED and prompts.messages
    assert not marker(skills).exists()


async def test_elicitation_off_falls_back_to_the_token_flow(skills: Path, era: str) -> None:
    prompts = Prompts("accept")
    async with connect([skills], era, env={"MCP_CONFIRM_ELICITATION": "off"}, prompts=prompts) as client:
        err, out = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills))])
    assert not err and out["status"] == "confirmation-required" and not prompts.messages


async def test_skill_list_reports_script_states_and_the_grant_source(skills: Path, era: str) -> None:
    async with connect([skills], era) as client:
        listing = (await client.call_tool("skill_list", {})).structured_content
    assert listing is not None and listing["grantFrom"] == "declaration"
    demo = next(s for s in listing["skills"] if s["name"] == "demo")
    assert [(s["script"], s["state"]) for s in demo["scripts"]] == [("scripts/echo.py", "runnable")]


async def test_hosted_without_grants_lists_the_script_as_not_granted_and_refuses_it(skills: Path, era: str) -> None:
    async with connect([skills], era, env={"MCP_DATA_DIR": str(skills / "out")}) as client:
        listing = (await client.call_tool("skill_list", {})).structured_content
        err, out = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills))])
    assert listing is not None and listing["grantFrom"] == "hosted-default" and listing["grantNote"]
    demo = next(s for s in listing["skills"] if s["name"] == "demo")
    assert demo["scripts"][0]["state"] == "not-granted"
    assert err and out["reason"] == Refusal.NOT_GRANTED


TINY_SERVER = (
    "import json, sys\n"
    "for line in sys.stdin:\n"
    "    try:\n"
    "        msg = json.loads(line)\n"
    "    except ValueError:\n"
    "        print(json.dumps({'jsonrpc': '2.0', 'id': None, 'error': {'code': -32700, 'message': 'parse'}}), flush=True)\n"
    "        continue\n"
    "    if 'id' in msg:\n"
    "        result = {'tools': []} if msg['method'] == 'tools/list' else {}\n"
    "        print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'], 'result': result}), flush=True)\n"
)


async def test_the_bundled_example_skill_runs_after_confirmation(era: str) -> None:
    bundled = load_settings((), {}).roots[0]
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    args = ["--timeout", "15", "--", python, "-c", TINY_SERVER]
    async with connect([bundled], era) as client:
        err, first = await run(client, skill="check-stdout-purity", script="scripts/check_stdout.py", args=args)
        assert not err and first["status"] == "confirmation-required"
        err, out = await run(
            client,
            skill="check-stdout-purity",
            script="scripts/check_stdout.py",
            args=args,
            confirmToken=first["confirmToken"],
        )
    assert not err and out["status"] == "ok", out
    assert out["stdout"].rstrip().endswith("PASS")


class Clock:
    def __init__(self) -> None:
        self.now = 2_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_an_expired_token_is_refused_through_the_sdk(skills: Path, era: str) -> None:
    # In-process server so the clock can be injected: tests never sleep past an expiry.
    from skill_mcp.catalog import build_catalog
    from skill_mcp.runner.core import Runner
    from skill_mcp.runner.harden import HardenReport
    from skill_mcp.server import build_server
    from skill_mcp.surfaces.run_tool import run_tool_spec

    settings = load_settings([str(skills)], {"PATH": "/usr/bin:/bin"})
    catalog = build_catalog(settings)
    clock = Clock()
    records: list[dict[str, Any]] = []
    runner = Runner.create(
        settings, harden=HardenReport(True, True), clock=clock, audit=lambda record: records.append(dict(record))
    )
    server = build_server(
        settings, lambda: catalog, tools=[run_tool_spec(runner)], script_states=runner.states(lambda: catalog)
    )
    async with Client(server, mode=era) as client:
        _, first = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills))])
        clock.now += 3600
        err, out = await run(
            client,
            skill="demo",
            script="scripts/echo.py",
            args=[str(marker(skills))],
            confirmToken=first["confirmToken"],
        )
    assert err and out["reason"] == Refusal.TOKEN_EXPIRED
    assert not Marker(records_log(records), str(marker(skills))).exists()


async def test_a_script_edited_while_the_prompt_is_open_is_refused(skills: Path, era: str) -> None:
    class EditingPrompts(Prompts):
        async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
            (skills / "demo" / "scripts" / "echo.py").write_text(ECHO + "print('swapped')\n", encoding="utf-8")
            return await super().__call__(ctx, params)

    prompts = EditingPrompts("accept")
    async with connect([skills], era, prompts=prompts) as client:
        err, out = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills))])
    assert prompts.messages and err and out["reason"] == Refusal.DRAFT_CHANGED
    assert not marker(skills).exists()


@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_confirmation_over_streamable_http(skills: Path, era: str, action: str) -> None:
    # Same flows over the HTTP transport: a back channel (handshake era) or the input-required round trip.
    from tests.http.harness import http_connect

    prompts = Prompts(action)
    async with http_connect(skills, era, elicitation_callback=prompts) as client:
        err, out = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills)), "h"])
    assert prompts.messages
    if action == "accept":
        assert not err and out["status"] == "ok" and json.loads(out["stdout"]) == ["h"]
    else:
        assert err and out["reason"] == Refusal.DECLINED and not marker(skills).exists()


async def test_token_flow_over_streamable_http(skills: Path, era: str) -> None:
    from tests.http.harness import http_connect

    async with http_connect(skills, era) as client:
        _, first = await run(client, skill="demo", script="scripts/echo.py", args=[str(marker(skills))])
        err, out = await run(
            client,
            skill="demo",
            script="scripts/echo.py",
            args=[str(marker(skills))],
            confirmToken=first["confirmToken"],
        )
    assert first["status"] == "confirmation-required" and not err and out["status"] == "ok"
