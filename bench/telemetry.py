"""Telemetry off vs on: start-up to the first answers, per-call latency, import cost.

Three servers (``skill-mcp serve`` on pipes, raw JSON lines, no SDK client on this side):

* ``off``: no telemetry variable set (the default);
* ``otlp``: spans and metrics exported over OTLP/HTTP to a receiver this script runs on
  loopback (it answers 200 and drops the body);
* ``file``: spans and metrics written to ``SKILL_MCP_OTEL_FILE`` in a scratch directory.

With ``--before-src DIR`` a fourth, ``before``: the server of another checkout's ``src/`` (one
without telemetry, where the SDK's own span middleware still runs), for "zero cost when off".

Ready: spawn to the ``initialize`` answer and to the ``tools/list`` answer, the variants visited
alternately (rotating which goes first), medians. Per call: one process of each kind answers
``tools/call skill_load`` of a small skill, in alternating blocks; each block's mean wall time
and the server's own CPU time per call (``/proc/<pid>/task/*/schedstat``, which a loaded
machine disturbs far less), medians, and the medians of paired block ratios to ``off``. Import cost: ``-X importtime`` of the
modules the handshake imports for OpenTelemetry (the SDK imports ``opentelemetry-api`` itself)
and of what a configured server adds.

    python -m bench.telemetry [--runs 15] [--calls 2000] [--before-src ../main/src]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
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

from bench.firstreply import cpu_seconds

SKILL = "---\nname: tiny\ndescription: A tiny skill for the telemetry bench.\n---\nDo the tiny thing.\n"
BEFORE_KEY = "__before_src__"  # not an environment variable: which source tree the variant runs
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}},
}


class _Sink(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


OURS = str(Path(__file__).resolve().parents[1] / "src")
# Every variant starts the same way (``python -m skill_mcp.server``, its tree first on the path),
# so the figures differ only by the tree and the variables.
COMMAND = [sys.executable, "-m", "skill_mcp.server"]


class Server:
    def __init__(self, root: Path, env: Mapping[str, str]) -> None:
        full = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root),
            "SKILL_MCP_LOG": "warning",
            "SKILL_MCP_CACHE": "off",
            "PYTHONPATH": env.get(BEFORE_KEY, OURS),
            **{k: v for k, v in env.items() if k != BEFORE_KEY},
        }
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [*COMMAND, "--skills-dir", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=full,
        )
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


def _import_ms(before: str, measured: str, runs: int = 7) -> float:
    """Median wall time of ``import measured`` in a fresh interpreter that already imported ``before``."""
    code = f"import time\n{before}\nt = time.perf_counter()\n{measured}\nprint(time.perf_counter() - t)"
    times = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
        times.append(float(done.stdout.strip()) * 1000)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.telemetry")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument(
        "--before-src", metavar="DIR", help="also run the server of another checkout's src/ (a tree without telemetry)"
    )
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
        if args.before_src:
            variants = {"before": {BEFORE_KEY: args.before_src}, **variants}
        names = list(variants)
        ready: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        for i in range(args.runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                server = Server(root, variants[name])
                try:
                    ready[name].append(server.handshake())
                finally:
                    server.close()
        servers = {n: Server(root, variants[n]) for n in names}
        blocks: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        try:
            for server in servers.values():
                server.handshake()
                server.request("tools/call", {"name": "skill_load", "arguments": {"name": "tiny"}})  # warm
            for b in range(max(1, args.calls // args.block)):
                order = names[b % len(names) :] + names[: b % len(names)]
                for name in order:
                    server = servers[name]
                    start, start_cpu = time.perf_counter(), cpu_seconds(server.proc.pid)
                    for _ in range(args.block):
                        server.request("tools/call", {"name": "skill_load", "arguments": {"name": "tiny"}})
                    blocks[name].append((time.perf_counter() - start) / args.block)
                    cpu[name].append((cpu_seconds(server.proc.pid) - start_cpu) / args.block)
        finally:
            for server in servers.values():
                server.close()
        print(f"ready (median of {args.runs}): initialize / tools/list, ms")
        for name in names:
            init = statistics.median(r[0] for r in ready[name]) * 1000
            listed = statistics.median(r[1] for r in ready[name]) * 1000
            print(f"  {name:5s} {init:7.1f} / {listed:7.1f}")
        print(
            f"per call, tools/call skill_load (median of {len(blocks['off'])} blocks of {args.block}): "
            "wall us, server CPU us, paired ratios to off"
        )
        for name in names:
            ratio = statistics.median(a / b for a, b in zip(blocks[name], blocks["off"], strict=True))
            cpu_ratio = statistics.median(a / b for a, b in zip(cpu[name], cpu["off"], strict=True))
            print(
                f"  {name:6s} wall {statistics.median(blocks[name]) * 1e6:7.1f} ({ratio:.3f})   "
                f"cpu {statistics.median(cpu[name]) * 1e6:7.1f} ({cpu_ratio:.3f})"
            )
        api = _import_ms("", "import opentelemetry.trace, opentelemetry.propagate, opentelemetry.context")
        sdk = _import_ms(
            "import mcp.server.lowlevel",
            "import skill_mcp.telemetry, opentelemetry.sdk.trace, opentelemetry.sdk.metrics, "
            "opentelemetry.exporter.otlp.proto.http.trace_exporter, "
            "opentelemetry.exporter.otlp.proto.http.metric_exporter",
        )
        print("import cost (median of 7 fresh interpreters), ms")
        print(f"  opentelemetry-api alone (the SDK imports it at every handshake, with or without us): {api:.1f}")
        print(
            f"  what a configured server adds after the SDK (telemetry, OpenTelemetry SDK, OTLP exporters): {sdk:.1f}"
        )
    finally:
        sink.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
