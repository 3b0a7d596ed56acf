"""Every MCP request is a span and a duration by the MCP semantic conventions; ``skill_run`` has
child spans; nothing secret is exported.

A real in-process server (the composition root's own wiring, ``server.compose.compose_parts``) and the SDK's
own client; the telemetry is the real ``skill_mcp.telemetry.Telemetry`` with an in-memory span
exporter and metric reader in place of OTLP. The canary test plants one string in the script's
arguments, in a granted secret variable, in the server's environment (an OTLP header, the way a
collector's API key travels) and in a file of the skill that is read and run, then greps every
exported span, event, resource and metric attribute for it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from skill_mcp.config import load_settings
from skill_mcp.runner.harden import HardenReport
from skill_mcp.server.compose import compose_parts
from skill_mcp.telemetry import Telemetry
from skill_mcp.telemetry_config import config_from_environ

pytestmark = pytest.mark.anyio

CANARY = "c4n4ry-7f3e9b21"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
SKILL_MD = """---
name: probe
description: Prints its arguments and a secret's length.
mcp-host:
  version: 1
  run:
    - script: scripts/run.py
      interpreter: python
      env: [PROBE_SECRET]
  env:
    - name: PROBE_SECRET
      secret: true
---
Run scripts/run.py. Notes are in references/notes.md.
"""
SCRIPT = f"""# {CANARY}: the script's own text
import os, sys
print(sys.argv[1:], len(os.environ.get("PROBE_SECRET", "")))
"""


@pytest.fixture
def skills() -> Iterator[Path]:
    # Not under tmp_path: a root server drops the script to nobody, who must reach it.
    root = Path(tempfile.mkdtemp(prefix="skill-mcp-telemetry-"))
    try:
        yield _write_probe(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write_probe(root: Path) -> Path:
    (root / "probe" / "scripts").mkdir(parents=True)
    (root / "probe" / "references").mkdir()
    (root / "probe" / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (root / "probe" / "scripts" / "run.py").write_text(SCRIPT, encoding="utf-8")
    (root / "probe" / "references" / "notes.md").write_text(f"notes {CANARY}\n", encoding="utf-8")
    root.chmod(0o755)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


class Recorded:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        env = {"OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{CANARY}", "OTEL_SERVICE_NAME": "probe-svc"}
        config = config_from_environ(env)
        # The in-memory parts stand in for OTLP; the config is the one the headers came in with.
        self.telemetry = Telemetry(
            config.__class__(service_name=config.service_name, traces_headers=config.traces_headers),
            span_exporters=[self.spans],
            metric_readers=[self.metrics],
        )

    def finished(self) -> list[Any]:
        self.telemetry.flush()
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        out: list[Any] = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        out.extend(metric.data.data_points)
        return out


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    rec = Recorded()
    yield rec
    rec.telemetry.shutdown()


@asynccontextmanager
async def serving(skills: Path, recorded: Recorded, era: str = "legacy", **client_kwargs: Any):
    grant = json.dumps([{"skill": "probe", "script": "scripts/run.py", "env": ["PROBE_SECRET"]}])
    env = {
        "PATH": "/usr/bin:/bin",
        "MCP_SKILL_RUN": grant,
        "PROBE_SECRET": CANARY,
        "SKILL_MCP_CACHE": "off",
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{CANARY}",
    }
    if "elicitation_callback" not in client_kwargs:
        env["MCP_CONFIRM_ELICITATION"] = "off"
    settings = load_settings([str(skills)], env)
    from skill_mcp.runner import deferred

    # The boot hardening would wipe this test process's own environment block: the in-process
    # server is told it happened (the fence suites test the real one).
    # deferred looks the name up at boot (not re-exported: mypy's attr-defined).
    original = deferred.harden_process  # type: ignore[attr-defined]
    deferred.harden_process = lambda: HardenReport(True, True)  # type: ignore[attr-defined]
    try:
        parts = compose_parts(settings, None, recorded.telemetry, transport="pipe")
        async with Client(parts.server, mode=era, **client_kwargs) as client:
            yield client
    finally:
        deferred.harden_process = original  # type: ignore[attr-defined]


def _meta() -> dict[str, str]:
    return {"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN}-01", "tracestate": "vendor=1"}


async def _run(client: Any, args: list[str]) -> dict[str, Any]:
    call = {"skill": "probe", "script": "scripts/run.py", "args": args}
    first = await client.call_tool("skill_run", call, meta=_meta())
    token = dict(first.structured_content or {})["confirmToken"]
    done = await client.call_tool("skill_run", {**call, "confirmToken": token}, meta=_meta())
    out = dict(done.structured_content or {})
    assert not done.is_error and out["status"] == "ok", out
    return out


async def test_every_request_is_a_server_span_named_by_the_mcp_conventions(
    skills: Path, recorded: Recorded, era: str
) -> None:
    async with serving(skills, recorded, era) as client:
        await client.list_tools()
        await client.call_tool("skill_list", {})
        await client.read_resource("skill://probe/SKILL.md")
        await client.get_prompt("probe")
    spans = {s.name: s for s in recorded.finished()}
    assert {"tools/list", "tools/call skill_list", "resources/read", "prompts/get probe"} <= set(spans), sorted(spans)
    assert spans["prompts/get probe"].attributes["gen_ai.prompt.name"] == "probe"
    call = spans["tools/call skill_list"]
    assert call.kind.name == "SERVER"
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.attributes["gen_ai.tool.name"] == "skill_list"
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["network.transport"] == "pipe"
    assert call.attributes["mcp.protocol.version"]
    assert spans["resources/read"].attributes["mcp.resource.uri"] == "skill://probe/SKILL.md"
    assert call.status.status_code.name == "UNSET"
    durations = recorded.points("mcp.server.operation.duration")
    tools = {p.attributes.get("gen_ai.tool.name") for p in durations}
    assert "skill_list" in tools and {p.attributes["mcp.method.name"] for p in durations} >= {"tools/list"}


async def test_skill_run_spans_continue_the_callers_trace_from_meta(skills: Path, recorded: Recorded) -> None:
    async with serving(skills, recorded) as client:
        await _run(client, ["a"])
    spans = recorded.finished()
    server = [s for s in spans if s.name == "tools/call skill_run"]
    assert len(server) == 2
    for span in server:
        assert format(span.context.trace_id, "032x") == TRACE_ID
        assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_SPAN
        assert span.parent.is_remote
    run = next(s for s in spans if s.name == "skill_run run")
    prepare = [s for s in spans if s.name == "skill_run prepare"]
    assert len(prepare) == 2 and all(p.parent.span_id in {s.context.span_id for s in server} for p in prepare)
    assert run.parent.span_id == server[1].context.span_id
    attrs = run.attributes
    assert attrs["skill_mcp.skill"] == "probe" and attrs["skill_mcp.script"] == "scripts/run.py"
    assert str(attrs["skill_mcp.script.digest"]).startswith("sha256:")
    assert attrs["skill_mcp.run.interpreter"] == "python" and attrs["skill_mcp.run.status"] == "ok"
    assert attrs["process.exit.code"] == 0 and attrs["skill_mcp.run.truncated.stdout"] is False
    assert attrs["skill_mcp.confirmation"] == "token"
    runs = recorded.points("skill_mcp.runs")
    by_status = {p.attributes["skill_mcp.run.status"]: p.value for p in runs}
    assert by_status == {"confirmation-required": 1, "ok": 1}


async def test_no_exported_attribute_carries_an_argument_env_or_file_canary(skills: Path, recorded: Recorded) -> None:
    async with serving(skills, recorded) as client:
        out = await _run(client, [CANARY, f"--flag={CANARY}"])
        assert CANARY in out["stdout"]  # positive control: the argument reached the script
        notes = await client.call_tool("skill_file", {"name": "probe", "paths": ["references/notes.md"]})
        # and the file's content the client (its body travels in content, once)
        assert CANARY in json.dumps([block.model_dump(mode="json") for block in notes.content])
        refused = await client.call_tool("skill_load", {"name": f"no-{CANARY}"})
        assert refused.is_error
        with pytest.raises(MCPError):
            await client.read_resource(f"skill://{CANARY}/SKILL.md")
        unknown_tool = await _call_unknown(client, f"tool-{CANARY}")
        assert unknown_tool
    spans = recorded.finished()
    assert len(spans) >= 6
    exported: list[str] = []
    for span in spans:
        exported += [f"{span.name}", *(f"{k}={v}" for k, v in span.attributes.items())]
        exported += [f"{k}={v}" for e in span.events for k, v in e.attributes.items()]
        exported += [f"{k}={v}" for k, v in span.resource.attributes.items()]
        exported.append(str(span.status.description))
    data = recorded.metrics.get_metrics_data()
    assert data is not None
    exported.append(data.to_json())
    found = [line for line in exported if CANARY in line]
    assert not found, found
    assert any("skill_mcp.run.status=ok" in line for line in exported)  # positive control: the run is there


async def _call_unknown(client: Any, name: str) -> bool:
    try:
        result = await client.call_tool(name, {"x": CANARY})
    except MCPError:
        return True
    return bool(result.is_error)


async def test_a_failed_tool_call_is_an_error_span_with_its_reason(skills: Path, recorded: Recorded) -> None:
    async with serving(skills, recorded) as client:
        refused = await client.call_tool("skill_load", {"name": "nothing-here"})
        assert refused.is_error
        fine = await client.call_tool("skill_load", {"name": "probe"})
        assert not fine.is_error
    spans = [s for s in recorded.finished() if s.name == "tools/call skill_load"]
    failed, ok = spans
    assert failed.status.status_code.name == "ERROR" and failed.attributes["error.type"] == "tool_error"
    assert failed.attributes["skill_mcp.reason"] == "unknown-skill"
    assert ok.status.status_code.name == "UNSET" and "error.type" not in ok.attributes  # positive control
    refusals = recorded.points("skill_mcp.refusals")
    assert [(p.attributes["skill_mcp.reason"], p.value) for p in refusals] == [("unknown-skill", 1)]


async def test_a_refused_run_carries_its_reason_on_the_prepare_span(skills: Path, recorded: Recorded) -> None:
    async with serving(skills, recorded) as client:
        out = await client.call_tool("skill_run", {"skill": "probe", "script": "scripts/other.py"})
        assert out.is_error
    prepare = next(s for s in recorded.finished() if s.name == "skill_run prepare")
    reason = dict(out.structured_content or {})["reason"]
    assert prepare.attributes["skill_mcp.reason"] == reason and prepare.status.status_code.name == "ERROR"
    assert "skill_mcp.script" not in prepare.attributes  # a refused name is client input: not recorded
    runs = recorded.points("skill_mcp.runs")
    assert [(p.attributes["skill_mcp.run.status"], p.attributes["skill_mcp.reason"]) for p in runs] == [
        ("refused", reason)
    ]


async def test_catalog_and_search_builds_are_timed_and_the_catalog_counted(skills: Path, recorded: Recorded) -> None:
    async with serving(skills, recorded) as client:
        await client.call_tool("skill_search", {"query": "prints arguments"})
    assert [p.count for p in recorded.points("skill_mcp.catalog.build.duration")] == [1]
    assert [p.count for p in recorded.points("skill_mcp.search.index.build.duration")] == [1]
    assert [p.value for p in recorded.points("skill_mcp.catalog.skills")] == [1]


async def _accept(ctx: Any, params: Any) -> Any:
    import mcp_types as types

    return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.parametrize(("era", "via"), [("legacy", "elicitation"), ("2026-07-28", "input-response")])
async def test_an_accepted_confirmation_is_a_span_beside_the_run(
    skills: Path, recorded: Recorded, era: str, via: str
) -> None:
    async with serving(skills, recorded, era, elicitation_callback=_accept) as client:
        done = await client.call_tool(
            "skill_run", {"skill": "probe", "script": "scripts/run.py", "args": ["x"]}, meta=_meta()
        )
        assert dict(done.structured_content or {})["status"] == "ok", done
    spans = recorded.finished()
    (confirmation,) = [s for s in spans if s.name == "skill_run confirmation"]
    (run,) = [s for s in spans if s.name == "skill_run run"]
    assert confirmation.attributes["skill_mcp.confirmation"] == via
    assert confirmation.attributes["skill_mcp.confirmation.action"] == "accept"
    assert run.attributes["skill_mcp.confirmation"] == via and run.attributes["skill_mcp.run.status"] == "ok"
    assert format(run.context.trace_id, "032x") == TRACE_ID
