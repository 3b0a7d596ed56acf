"""Telemetry with real parts: an OTLP/HTTP receiver, a real Prometheus, the real server process.

* Over stdio, the server exports the spans of one ``skill_run`` to an OTLP/HTTP receiver this
  test runs on loopback (decoded with ``opentelemetry-proto``): they continue the trace the
  client put in ``params._meta``, and the raw bytes received never hold the canary planted in
  the arguments and the environment.
* Over HTTP, Debian's ``prometheus`` (started here on loopback with a configuration this test
  writes, bounded, stopped after) scrapes ``--metrics`` and answers a PromQL query for the run
  counter.
* The scrape endpoint on the MCP port is behind the token and the Host check (with the positive
  control), and refused on a server without a token.
"""

from __future__ import annotations

import http.server
import json
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.demo_skill import demo_root
from tests.http.harness import HttpServer, child_env, http_client, running_http_server
from tests.integration.harness import connect

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TOKEN = "telemetry-token-0123456789abcdef"
CANARY = "c4n4ry-5d1a88e0"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"
WAIT_S = 30.0
_METRICS_URL = re.compile(r"metrics listening on (http://[^\s\"]+/metrics)")


class OtlpReceiver:
    """A loopback OTLP/HTTP receiver: keeps each POST's path, headers and body."""

    def __init__(self) -> None:
        received: list[tuple[str, dict[str, str], bytes]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self) -> list[Any]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out = []
        for path, _, body in self.received:
            if path == "/v1/traces":
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                out += [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
        return out


@pytest.fixture(scope="module")
def skills() -> Iterator[Path]:
    with demo_root("skill-mcp-telemetry-http-") as root:
        yield root


async def _run_once(client: Any, mark: Path, *, meta: dict[str, str] | None = None) -> dict[str, Any]:
    args = {"skill": "demo", "script": "scripts/echo.py", "args": [str(mark), CANARY]}
    first = await client.call_tool("skill_run", args, meta=meta)
    token = dict(first.structured_content or {})["confirmToken"]
    done = await client.call_tool("skill_run", {**args, "confirmToken": token}, meta=meta)
    out = dict(done.structured_content or {})
    assert not done.is_error and out["status"] == "ok", out
    return out


@pytest.mark.slow
async def test_the_spans_of_one_skill_run_reach_an_otlp_receiver_under_the_callers_trace(skills: Path) -> None:
    mark = skills / "out" / "otlp"
    with OtlpReceiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_SERVICE_NAME": "skill-mcp-test",
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={CANARY}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "MCP_CONFIRM_ELICITATION": "off",
            "PROBE_SECRET": CANARY,
        }
        meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN}-01"}
        async with connect(skills, "legacy", env=env) as client:
            out = await _run_once(client, mark, meta=meta)
            assert CANARY in out["stdout"]  # positive control: the argument reached the script
            deadline = time.monotonic() + WAIT_S
            while not any(s.name == "skill_run run" for s in receiver.spans()) and time.monotonic() < deadline:
                time.sleep(0.1)
        spans = receiver.spans()
    names = [s.name for s in spans]
    assert "skill_run run" in names and names.count("tools/call skill_run") == 2, names
    server = [s for s in spans if s.name == "tools/call skill_run"]
    assert all(s.trace_id.hex() == TRACE_ID and s.parent_span_id.hex() == PARENT_SPAN for s in server)
    run = next(s for s in spans if s.name == "skill_run run")
    assert run.trace_id.hex() == TRACE_ID and run.parent_span_id == server[1].span_id
    attrs = {a.key: a.value for a in run.attributes}
    assert attrs["skill_mcp.skill"].string_value == "demo"
    assert attrs["skill_mcp.script.digest"].string_value.startswith("sha256:")
    assert attrs["skill_mcp.run.status"].string_value == "ok" and attrs["process.exit.code"].int_value == 0
    bodies = [body for _, _, body in receiver.received]
    assert all(CANARY.encode() not in body for body in bodies)
    # Positive control for the grep: the configured header (a collector's key) did reach the receiver.
    assert all(headers.get("x-api-key") == CANARY for _, headers, _ in receiver.received)


def _metrics_url(srv: HttpServer) -> str:
    """The scrape URL the server logs once its own listener is bound (port 0 asked)."""
    deadline = time.monotonic() + WAIT_S
    while (found := _METRICS_URL.search(srv.stderr)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert found is not None, srv.stderr
    return found.group(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


class Prometheus:
    """Debian's prometheus on loopback, scraping one target every second; stopped on exit."""

    def __init__(self, target: str, *, bearer: str | None = None, metrics_path: str = "/metrics") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="skill-mcp-prometheus-"))
        self.port = _free_port()
        auth = f"    authorization: {{credentials: {bearer}}}\n" if bearer else ""
        (self.dir / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: skill-mcp\n"
            f"    metrics_path: {metrics_path}\n"
            f"{auth}"
            f"    static_configs: [{{targets: ['{target}']}}]\n",
            encoding="utf-8",
        )
        binary = shutil.which("prometheus")
        assert binary, "prometheus is not installed (.ci/setup.d/prometheus.sh installs it)"
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def query(self, promql: str) -> list[Any]:
        status, body = _get(f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        return list(json.loads(body)["data"]["result"]) if status == 200 else []

    def wait_for(self, promql: str) -> list[Any]:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.stderr.read().decode() if self.proc.stderr else ""
            try:
                result = self.query(promql)
            except OSError:
                result = []
            if result:
                return result
            time.sleep(0.5)
        raise AssertionError(f"prometheus never answered {promql!r}")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.mark.slow
async def test_prometheus_scrapes_the_run_counter_and_answers_promql(skills: Path) -> None:
    env = {"SKILL_MCP_METRICS": "127.0.0.1:0"}
    with running_http_server([skills], token=TOKEN, env=env) as srv:
        url = _metrics_url(srv)
        async with http_client(srv.url, token=TOKEN) as client:
            await _run_once(client, skills / "out" / "prometheus")
        prometheus = Prometheus(urllib.parse.urlsplit(url).netloc)
        try:
            result = prometheus.wait_for('sum by (skill_mcp_run_status) (skill_mcp_runs_total{skill_mcp_skill="demo"})')
            durations = prometheus.wait_for(
                'sum(mcp_server_operation_duration_seconds_count{gen_ai_tool_name="skill_run"})'
            )
        finally:
            prometheus.close()
    assert [(r["metric"]["skill_mcp_run_status"], r["value"][1]) for r in result] == [("ok", "1")]
    assert durations[0]["value"][1] == "2"  # the preview and the confirmed run


@pytest.mark.slow
async def test_metrics_on_the_mcp_port_need_the_token_and_an_allowed_host(skills: Path) -> None:
    with running_http_server([skills], token=TOKEN, env={"SKILL_MCP_METRICS": "/metrics"}) as srv:
        async with http_client(srv.url, token=TOKEN, mode="legacy") as client:  # one session, ended by DELETE
            await client.call_tool("skill_list", {})
        base = f"http://127.0.0.1:{srv.port}/metrics"
        assert _get(base)[0] == 401
        assert _get(base, {"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"})[0] == 421
        status, body = _get(base, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and "# TYPE" in body  # positive control: the token and a loopback Host pass
    values = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line and not line.startswith("#")
    }
    sessions = [v for k, v in values.items() if k.startswith("mcp_server_session_duration_seconds_count")]
    assert sessions == [1.0], sorted(values)
    assert any(k.startswith("skill_mcp_http_connections") for k in values)
    assert any(k.startswith("http_server_active_requests") for k in values)
    assert any(k.startswith("skill_mcp_catalog_skills") and v == 1.0 for k, v in values.items())


@pytest.mark.slow
def test_metrics_on_the_mcp_port_are_refused_without_a_token(skills: Path) -> None:
    from tests.http.harness import server_argv

    argv = [*server_argv([skills], no_auth=True), "--metrics", "/metrics"]
    done = subprocess.run(argv, env=child_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert done.returncode == 3, done.stderr  # skill-mcp's "could not start" (reason: tests/http/test_metrics_plan.py)
    assert b"http listening" not in done.stderr and b"SERVING WITHOUT" not in done.stderr
    # Positive control: its own loopback address is allowed on the same server without a token.
    with running_http_server([skills], no_auth=True, env={"SKILL_MCP_METRICS": "127.0.0.1:0"}) as srv:
        url = _metrics_url(srv)
        assert _get(url)[0] == 200
        assert _get(url, {"Host": "evil.example"})[0] == 421
