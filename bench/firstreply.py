"""Start-up in isolation: spawn a server, write one ``initialize`` line, time the first reply.

No SDK client is involved on this side (the harness's own start-up and task groups stay out
of the figure): the child is started with ``subprocess.Popen`` on pipes, the request is
written at once (the server reads it whenever it gets there), and the clock stops when the
first line comes back on stdout; then ``tools/list`` is sent and timed the same way. Beside
each wall-clock figure the child's CPU time so far is read from ``/proc/<pid>/task/*/schedstat``
(nanoseconds on a CPU, every thread): on a loaded machine wall time mostly measures the other
processes, CPU time much less so. The floor and our server are visited alternately, rotating
which goes first, and medians and the median of paired ratios are printed. For profiling a
start-up change, not for the report.

    python -m bench.firstreply --skills-dir /tmp/skill-mcp-bench/corpus-1000 --runs 30
    python -m bench.firstreply --ours-cmd "python -X importtime -m skill_mcp.cli serve" ...
    python -m bench.firstreply --skills-dir ... --instructions   # needs valgrind

``--instructions`` runs each server once under valgrind (cachegrind without the cache model,
``PYTHONHASHSEED=0``) and counts the instructions it executes from its start to the
``tools/list`` answer (the server is then stopped by ``SIGUSR1``, which neither handles, so
valgrind prints its count without the interpreter's teardown). The count moves by well under
0.1% between runs whatever else the machine is doing, so it shows a start-up change that the
wall clock of a shared machine hides.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.servers import FLOOR_FILE, ours_command

TIMEOUT_S = 30.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "firstreply", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _line(message: Mapping[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _read_line(fd: int, deadline: float) -> bytes:
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.perf_counter()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError("no reply in time")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise EOFError("the server closed stdout before replying")
        buf += chunk
    return buf


def cpu_seconds(pid: int) -> float:
    """CPU time the process's threads have spent so far (``schedstat``'s first field, in ns)."""
    total = 0
    for task in os.scandir(f"/proc/{pid}/task"):
        try:
            with open(f"{task.path}/schedstat", "rb") as handle:
                total += int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9


Sample = tuple[float, float, float, float]


def once(command: Sequence[str], env: dict[str, str]) -> Sample:
    """Seconds from spawn to the ``initialize`` reply and to the ``tools/list`` reply, then the
    child's CPU seconds at each of those two moments."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_line(INITIALIZE))
        proc.stdin.flush()
        deadline = start + TIMEOUT_S
        _read_line(proc.stdout.fileno(), deadline)
        initialized = time.perf_counter() - start
        cpu_initialized = cpu_seconds(proc.pid)
        proc.stdin.write(_line(INITIALIZED) + _line(TOOLS_LIST))
        proc.stdin.flush()
        _read_line(proc.stdout.fileno(), deadline)
        ready = time.perf_counter() - start
        cpu_ready = cpu_seconds(proc.pid)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)
        proc.stdout.close()
    return initialized, ready, cpu_initialized, cpu_ready


def instructions(command: Sequence[str], env: dict[str, str]) -> int:
    """Instructions the server executes from its start to the ``tools/list`` answer (valgrind)."""
    vg = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *command]
    proc = subprocess.Popen(
        vg, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**env, "PYTHONHASHSEED": "0"}
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        deadline = time.perf_counter() + 20 * TIMEOUT_S  # valgrind runs Python ~30x slower
        proc.stdin.write(_line(INITIALIZE))
        proc.stdin.flush()
        _read_line(proc.stdout.fileno(), deadline)
        proc.stdin.write(_line(INITIALIZED) + _line(TOOLS_LIST))
        proc.stdin.flush()
        _read_line(proc.stdout.fileno(), deadline)
        proc.send_signal(signal.SIGUSR1)
        _, err = proc.communicate(timeout=20 * TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)
    found = re.search(rb"I\s+refs:\s+([\d,]+)", err)
    if found is None:
        raise RuntimeError("valgrind printed no instruction count")
    return int(found.group(1).replace(b",", b""))


def _ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.firstreply", description=__doc__.splitlines()[0])
    p.add_argument("--skills-dir", type=Path, default=None, help="our server's root (default: the bundled pack)")
    p.add_argument("--runs", type=int, default=20, help="visits per server (default 20)")
    p.add_argument("--ours-cmd", default=None, help="our command line instead of `skill-mcp serve`")
    p.add_argument("--floor-cmd", default=None, help="the floor's command line instead of bench/floor.py")
    p.add_argument("--instructions", action="store_true", help="count instructions under valgrind instead")
    args = p.parse_args(argv)
    floor = shlex.split(args.floor_cmd) if args.floor_cmd else [sys.executable, str(FLOOR_FILE)]
    ours = shlex.split(args.ours_cmd) if args.ours_cmd else list(ours_command())
    if args.skills_dir is not None:
        ours += ["--skills-dir", str(args.skills_dir)]
    # Like the SDK client: a small default environment, the same for both servers.
    env = {k: os.environ[k] for k in ("HOME", "PATH", "LANG", "TERM", "USER") if k in os.environ}
    env["SKILL_MCP_LOG"] = "warning"
    if args.instructions:
        floor_count, ours_count = instructions(floor, env), instructions(ours, env)
        print(
            f"instructions to the tools/list answer: floor {floor_count / 1e6:,.1f} M, ours "
            f"{ours_count / 1e6:,.1f} M ({(ours_count - floor_count) / 1e6:+,.1f} M, "
            f"{ours_count / floor_count:.3f}x)"
        )
        return 0
    samples: dict[str, list[Sample]] = {"floor": [], "ours": []}
    once(floor, env), once(ours, env)  # warm the page cache, discarded
    for i in range(args.runs):
        order = [("floor", floor), ("ours", ours)]
        for label, command in order if i % 2 == 0 else order[::-1]:
            samples[label].append(once(command, env))
    print(f"{args.runs} runs each; medians in ms", file=sys.stderr)
    print("server   initialize   ready   cpu@initialize   cpu@ready")
    for label, got in samples.items():
        print(
            f"{label:6} {_ms([s[0] for s in got])}     {_ms([s[1] for s in got])}       "
            f"{_ms([s[2] for s in got])}     {_ms([s[3] for s in got])}"
        )
    f, o = samples["floor"], samples["ours"]
    for k, name in ((0, "initialize"), (1, "ready"), (2, "cpu@initialize"), (3, "cpu@ready")):
        paired = statistics.median(b[k] / a[k] for a, b in zip(f, o, strict=True))
        delta = statistics.median(b[k] - a[k] for a, b in zip(f, o, strict=True)) * 1000
        print(
            f"{name}: paired ratio {paired:.3f}x, ratio of medians "
            f"{statistics.median(x[k] for x in o) / statistics.median(x[k] for x in f):.3f}x, "
            f"median paired delta {delta:+.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
