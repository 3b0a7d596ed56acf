"""Telemetry leaves the appliance without the server uid getting any network.

The image runs with the documented flags and the ruleset unchanged; the server writes its spans
to ``SKILL_MCP_OTEL_FILE`` on a volume (the documented sidecar path), and this test, standing in
for the collector outside the container's network namespace, reads the OTLP JSON lines: the
spans of one ``skill_run`` under the trace the client sent in ``params._meta``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.appliance.conftest import SKILLS_MOUNT, run_flags

pytestmark = pytest.mark.appliance

PROBE = {"skill": "probe", "script": "scripts/probe.py"}
TRACE_ID = "5b8efff798038103d269b633813fc60c"
PARENT_SPAN = "eee19b7ec3c1b174"
SERVER_UID = 10001


@pytest.fixture
def telemetry_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="skill-mcp-otel-"))
    os.chown(path, SERVER_UID, SERVER_UID)  # the volume the server uid owns (docs/deploy.md)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _params(image: str, telemetry: Path) -> StdioServerParameters:
    env = {
        "MCP_CONFIRM_ELICITATION": "off",
        "SKILL_MCP_LOG": "warning",
        "MCP_SKILL_RUN": json.dumps([PROBE]),
        "SKILL_MCP_OTEL_FILE": "/telemetry/otlp.jsonl",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    args = ["run", "-i", "--rm", *run_flags(), *SKILLS_MOUNT, "-v", f"{telemetry}:/telemetry"]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    return StdioServerParameters(command="docker", args=[*args, image])


def _spans(path: Path) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                spans += ss.get("spans", [])
    return spans


def test_spans_reach_the_telemetry_volume_while_the_server_has_no_network(image: str, telemetry_dir: Path) -> None:
    # An open map (PEP 728 extra_items), which mypy does not read yet.
    meta: types.RequestParamsMeta = {"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN}-01"}  # type: ignore[typeddict-unknown-key]

    async def go() -> None:
        async with Client(_params(image, telemetry_dir), mode="legacy", read_timeout_seconds=90) as client:
            call = {**PROBE, "args": ["id"]}
            first = await client.call_tool("skill_run", call, meta=meta)
            token = dict(first.structured_content or {})["confirmToken"]
            done = await client.call_tool("skill_run", {**call, "confirmToken": token}, meta=meta)
            assert dict(done.structured_content or {})["status"] == "ok", done
            # The denial beside it: the server uid itself still reaches nothing (the probe's
            # own network checks live in test_egress.py; here the ruleset is the documented one).

    anyio.run(go)  # the server exits on stdin EOF and flushes its spans
    written = telemetry_dir / "otlp.jsonl"
    assert written.exists(), sorted(p.name for p in telemetry_dir.iterdir())
    assert written.stat().st_uid == SERVER_UID and written.stat().st_mode & 0o077 == 0
    spans = _spans(written)
    run = [s for s in spans if s["name"] == "skill_run run"]
    calls = [s for s in spans if s["name"] == "tools/call skill_run"]
    assert len(run) == 1 and len(calls) == 2, [s["name"] for s in spans]
    assert all(s["traceId"] == TRACE_ID and s["parentSpanId"] == PARENT_SPAN for s in calls)
    assert run[0]["traceId"] == TRACE_ID and run[0]["parentSpanId"] == calls[1]["spanId"]
    attrs = {a["key"]: a["value"] for a in run[0]["attributes"]}
    assert attrs["skill_mcp.run.status"] == {"stringValue": "ok"}
    assert attrs["skill_mcp.script.digest"]["stringValue"].startswith("sha256:")
