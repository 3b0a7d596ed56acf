"""Telemetry off vs on: start-up to the first answers, per-call latency, import cost.

Three servers (``skill-mcp serve`` on pipes, raw JSON lines, no SDK client on this side):

* ``off``: no telemetry variable set (the default);
* ``otlp``: spans and metrics exported over OTLP/HTTP to a receiver this script runs on
  loopback (it answers 200 and drops the body);
* ``file``: spans and metrics written to ``SKILL_MCP_OTEL_FILE`` in a scratch directory.

Ready: spawn to the ``initialize`` answer and to the ``tools/list`` answer, the variants visited
alternately (rotating which goes first), medians. Per call: one process of each kind answers
``tools/call skill_load`` of a small skill, in alternating blocks, medians of each block's
mean; the ratio is the median of paired block ratios. Import cost: ``-X importtime`` of the
modules the handshake imports for OpenTelemetry (the SDK imports ``opentelemetry-api`` itself)
and of what a configured server adds.

    python -m bench.telemetry [--runs 15] [--calls 2000]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

SKILL = "---\nname: tiny\ndescription: A tiny skill for the telemetry bench.\n---\nDo the tiny thing.\n"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}}}


class _Sink(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _command() -> list[str]:
    script = Path(sys.executable).with_name("skill-mcp")
    return [str(script), "serve"] if script.exists() else [sys.executable, "-m", "skill_mcp.server"]


class Server:
    def __init__(self, root: Path, env: Mapping[str, str]) -> None:
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "SKILL_MCP_LOG": "warning",
                "SKILL_MCP_CACHE": "off", **env}
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([*_command(), "--skills-dir", str(root)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=full)
        self._buf = b""
        self._id = 1

    def send(self, message: Mapping[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = 60.0) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError("no answer")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError("server closed stdout")
            self._buf += chunk
        out, _, self._buf = self._buf.partition(b"\n")
        return out

    def request(self, method: str, params: Mapping[str, object] | None = None) -> bytes:
        self._id += 1
        self.send({"jsonrpc": "2.0", "id": self._id, "method": method, **({"params": params} if params else {})})
        return self.line()

    def handshake(self) -> tuple[float, float]:
        self.send(INIT)
        self.line()
        init = time.perf_counter() - self.started
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.request("tools/list")
        return init, time.perf_counter() - self.started

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _import_us(code: str) -> dict[str, int]:
    """``-X importtime`` cumulative microseconds of each top-level module the code imports."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    out: dict[str, int] = {}
    for row in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+\s+\|\s+(\d+)\s+\|(\s*)(\S+)", row)
        if match and len(match.group(2)) == 1:  # top level of the import tree
            out[match.group(3)] = int(match.group(1))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.telemetry")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--block", type=int, default=100)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-otel-"))
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    try:
        root = work / "skills"
        (root / "tiny").mkdir(parents=True)
        (root / "tiny" / "SKILL.md").write_text(SKILL, encoding="utf-8")
        variants: dict[str, dict[str, str]] = {
            "off": {},
            "otlp": {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}"},
            "file": {"SKILL_MCP_OTEL_FILE": str(work / "otlp.jsonl")},
        }
        names = list(variants)
        ready: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        for i in range(args.runs):
            for name in names[i % len(names):] + names[:i % len(names)]:
                server = Server(root, variants[name])
                try:
                    ready[name].append(server.handshake())
                finally:
                    server.close()
        servers = {n: Server(root, variants[n]) for n in names}
        blocks: dict[str, list[float]] = {n: [] for n in names}
        try:
            for server in servers.values():
                server.handshake()
                server.request("tools/call", {"name": "skill_load", "arguments": {"name": "tiny"}})  # warm
            for b in range(max(1, args.calls // args.block)):
                order = names[b % len(names):] + names[:b % len(names)]
                for name in order:
                    server = servers[name]
                    start = time.perf_counter()
                    for _ in range(args.block):
                        server.request("tools/call", {"name": "skill_load", "arguments": {"name": "tiny"}})
                    blocks[name].append((time.perf_counter() - start) / args.block)
        finally:
            for server in servers.values():
                server.close()
        print(f"ready (median of {args.runs}): initialize / tools/list, ms")
        for name in names:
            init = statistics.median(r[0] for r in ready[name]) * 1000
            listed = statistics.median(r[1] for r in ready[name]) * 1000
            print(f"  {name:5s} {init:7.1f} / {listed:7.1f}")
        print(f"per call, tools/call skill_load (median of {len(blocks['off'])} blocks of {args.block}), us")
        for name in names:
            ratio = statistics.median(a / b for a, b in zip(blocks[name], blocks["off"], strict=True))
            print(f"  {name:5s} {statistics.median(blocks[name]) * 1e6:7.1f}   ratio to off {ratio:.3f}")
        api = _import_us("import opentelemetry.trace, opentelemetry.propagate, opentelemetry.context")
        sdk = _import_us("import mcp.server.lowlevel; import skill_mcp.telemetry, opentelemetry.sdk.trace, "
                         "opentelemetry.sdk.metrics, opentelemetry.exporter.otlp.proto.http.trace_exporter, "
                         "opentelemetry.exporter.otlp.proto.http.metric_exporter")
        print("import cost (-X importtime, cumulative, one run), ms")
        print(f"  opentelemetry-api (imported by the SDK at every handshake): {sum(api.values()) / 1000:.1f}")
        extra = {k: v for k, v in sdk.items() if k != "mcp"}
        print(f"  what a configured server adds (skill_mcp.telemetry, SDK, OTLP exporters): "
              f"{sum(extra.values()) / 1000:.1f}")
    finally:
        sink.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
