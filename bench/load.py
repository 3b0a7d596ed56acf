"""Load through the balancer: calls/s and latency for 1, 8, 32 and 64 concurrent HTTP clients,
on one appliance replica and on two, both behind the same HAProxy configuration.

    python -m bench.load                       # needs Docker, the appliance and balancer images
    python -m bench.load --clients 1,8 --seconds 5 --skills "$SKILL_MCP_PUBLIC_SKILLS/anthropics+skills"

Replicas and the balancer are containers this run starts (``bench.cluster``; the balancer
configuration is the one docs/deploy.md documents). The clients are the SDK's own (``mcp.Client``;
by default in the 2026-07-28 era, so every request is balanced on its own; ``--era legacy`` opens
handshake sessions, which the balancer keeps on one replica each), spread over ``--procs`` worker
processes so the load generator is not one Python event loop; each client calls in a closed loop
(its next call when the last one is answered) a fixed mix of read calls over the served skills.
Every level runs for ``--seconds`` in all (two slices, each after a one-second warm-up,
interleaved with the other replica counts' slices), bounded in calls too
(``--max-calls`` per client): calls/s is the calls answered inside the window over its length;
p50/p99 are over those calls; errors are calls that failed (any exception or an error result).

Everything runs on this machine: the clients, the balancer and the replicas share its cores, so
the figures say how the pieces behave together here, not what separate machines would do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from bench.cluster import (
    LB_IMAGE,
    PUBLIC_HOST,
    REPO,
    ClusterSpec,
    another_balancer,
    documented_haproxy_cfg,
    running,
    url,
    with_servers,
)
from bench.stats import ms

TOKEN = "bench-load-token-0123456789abcdef"
# The public collections live outside the repository (their text is never committed), in the
# directory SKILL_MCP_PUBLIC_SKILLS names, as the opt-in corpus tests read them too.
DEFAULT_SKILLS = Path(os.environ.get("SKILL_MCP_PUBLIC_SKILLS", "build/public-skills")) / "anthropics+skills"
WARMUP_S = 1.0
ROUNDS = 2  # slices per level and replica count, interleaved (see measure)
WORKER_TIMEOUT_S = 300


@dataclass(frozen=True, slots=True)
class Plan:
    """What one load run measures."""

    skills: Path = DEFAULT_SKILLS
    clients: tuple[int, ...] = (1, 8, 32, 64)
    replicas: tuple[int, ...] = (1, 2)
    seconds: float = 8.0
    procs: int = 2
    max_calls: int = 2000
    era: str = "2026-07-28"  # or "legacy": handshake sessions, balanced per session (sticky)


@dataclass(slots=True)
class Level:
    clients: int
    replicas: int
    window_s: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.window_s if self.window_s else math.nan

    def pct(self, q: float) -> float:
        if not self.latencies:
            return math.nan
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _calls(names: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The mix every client cycles through (starting at a different place)."""
    mix: list[tuple[str, dict[str, Any]]] = [("skill_list", {})]
    for name in names:
        mix += [
            ("skill_load", {"name": name}),
            ("skill_file", {"name": name, "paths": ["SKILL.md"]}),
            ("skills/get", {"uri": f"skill://{name}/SKILL.md"}),
            ("resources/read", {"uri": f"skill://{name}/SKILL.md"}),
        ]
    mix.append(("skill_search", {"query": "create a document"}))
    return mix


async def _one_call(client: Any, call: tuple[str, dict[str, Any]]) -> bool:
    from bench.measure import skills_get

    method, params = call
    if method == "skills/get":
        await skills_get(client, params["uri"])
        return True
    if method == "resources/read":
        await client.read_resource(params["uri"])
        return True
    result = await client.call_tool(method, params)
    return not result.is_error


async def _connect(
    url: str, clients: int, http: Any, stack: Any, era: str
) -> tuple[list[Any], list[tuple[str, dict[str, Any]]]]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    sessions = [
        await stack.enter_async_context(Client(streamable_http_client(url, http_client=http), mode=era, cache=None))
        for _ in range(clients)
    ]
    listed = await sessions[0].call_tool("skill_list", {})
    names = [s["name"] for s in (listed.structured_content or {}).get("skills", [])][:8]
    if not names:
        raise RuntimeError(f"the replicas serve no skills: {listed}")
    return sessions, _calls(names)


def _http(clients: int) -> Any:
    import httpx2

    headers = {"Authorization": f"Bearer {TOKEN}", "Host": PUBLIC_HOST}
    limits = httpx2.Limits(max_connections=clients, max_keepalive_connections=clients)
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0), limits=limits)


async def _worker(url: str, clients: int, max_calls: int, offset: int, era: str) -> dict[str, Any]:
    """``clients`` SDK clients in this process. Prints READY once they are connected, then reads
    the window (``start stop``, wall-clock seconds) from stdin and keeps every call answered in it."""
    from contextlib import AsyncExitStack

    latencies: list[float] = []
    errors = 0

    async def run(
        client: Any, mix: list[tuple[str, dict[str, Any]]], first: int, start_at: float, stop_at: float
    ) -> None:
        nonlocal errors
        i = first
        for _ in range(max_calls):
            now = time.time()
            if now >= stop_at:
                return
            began = time.perf_counter()
            try:
                ok = await _one_call(client, mix[i % len(mix)])
            except Exception:
                ok = False  # any failure of a call under load is counted, not raised
            took = time.perf_counter() - began
            if now >= start_at and time.time() < stop_at:
                if ok:
                    latencies.append(took)
                else:
                    errors += 1
            i += 1

    async with _http(clients) as http, AsyncExitStack() as stack:
        sessions, mix = await _connect(url, clients, http, stack, era)
        print("READY", flush=True)
        start_at, stop_at = (float(x) for x in (await anyio.to_thread.run_sync(sys.stdin.readline)).split())
        async with anyio.create_task_group() as tg:
            for n, client in enumerate(sessions):
                tg.start_soon(run, client, mix, offset + n * 3, start_at, stop_at)
    return {"latencies": latencies, "errors": errors}


async def _warm(url: str, replicas: int, era: str) -> None:
    """Every call of the mix a few times per replica before anything is timed: the first of each
    builds what the replica builds lazily (the catalog, the search index, digests)."""
    from contextlib import AsyncExitStack

    async with _http(1) as http, AsyncExitStack() as stack:
        (client,), mix = await _connect(url, 1, http, stack, era)
        for call in mix:
            for _ in range(2 * replicas):
                await _one_call(client, call)


async def _level(url: str, clients: int, replicas: int, plan: Plan) -> Level:
    procs, seconds = plan.procs, plan.seconds
    share = [clients // procs + (1 if p < clients % procs else 0) for p in range(min(procs, clients))]
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.load",
            "--worker",
            url,
            str(n),
            str(plan.max_calls),
            str(p * 7),
            plan.era,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for p, n in enumerate(share)
    ]
    for proc in workers:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), WORKER_TIMEOUT_S)
        if line.strip() != b"READY":
            raise RuntimeError(f"a load worker did not connect: {line!r}")
    start_at = time.time() + WARMUP_S
    window = f"{start_at!r} {start_at + seconds!r}\n".encode()
    for proc in workers:  # every worker gets the window before any is waited for
        assert proc.stdin is not None
        proc.stdin.write(window)
        await proc.stdin.drain()
    level = Level(clients, replicas, seconds)
    outputs = await asyncio.wait_for(
        asyncio.gather(*(proc.communicate() for proc in workers)), WORKER_TIMEOUT_S + seconds
    )
    for out, _ in outputs:
        data = json.loads(out)
        level.latencies += data["latencies"]
        level.errors += data["errors"]
    return level


def measure(image: str, lb_image: str, plan: Plan) -> list[Level]:
    """Every level on every replica count, interleaved in time.

    One set of replicas (as many as the largest count) runs for the whole measurement, with one
    balancer per count in front of the first ``count`` of them (an idle replica costs nothing).
    Each level is measured in ``ROUNDS`` slices, visiting the counts in turn and rotating who
    goes first, so a busy spell of this shared machine lands on every count alike rather than on
    whichever happened to run then.
    """
    cfg = documented_haproxy_cfg()
    most = max(plan.replicas)
    spec = ClusterSpec(image, (plan.skills,) * most, TOKEN, with_servers(cfg, most), lb_image=lb_image)
    levels = {(n, count): Level(n, count, 0.0) for n in plan.clients for count in plan.replicas}
    slice_plan = replace(plan, seconds=plan.seconds / ROUNDS)
    with running(spec) as cluster, ExitStack() as stack:
        urls = {
            count: cluster.url
            if count == most
            else url(stack.enter_context(another_balancer(cluster, with_servers(cfg, count))))
            for count in plan.replicas
        }
        asyncio.run(_warm(cluster.url, most, plan.era))
        for n in plan.clients:
            print(f"load: {n} clients on {', '.join(map(str, plan.replicas))} replica(s)", file=sys.stderr)
            for r in range(ROUNDS):
                order = list(plan.replicas[r % len(plan.replicas) :]) + list(plan.replicas[: r % len(plan.replicas)])
                for count in order:
                    part = asyncio.run(_level(urls[count], n, count, slice_plan))
                    total = levels[(n, count)]
                    total.window_s += part.window_s
                    total.latencies += part.latencies
                    total.errors += part.errors
    return list(levels.values())


def render(levels: list[Level], plan: Plan) -> str:
    by = {(lv.clients, lv.replicas): lv for lv in levels}
    counts = sorted({lv.replicas for lv in levels})
    head = "| clients | " + " | ".join(f"{r} replica(s): calls/s | p50 (ms) | p99 (ms) | errors" for r in counts) + " |"
    rule = "|---:|" + "---:|---:|---:|---:|" * len(counts)
    rows = []
    for n in sorted({lv.clients for lv in levels}):
        cells = []
        for r in counts:
            lv = by.get((n, r))
            cells.append(
                "| | | " if lv is None else f"{lv.rate:.0f} | {ms(lv.pct(0.5))} | {ms(lv.pct(0.99))} | {lv.errors}"
            )
        rows.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(
        [
            f"Through HAProxy (docs/deploy.md's configuration) to appliance replicas serving `{plan.skills}`; SDK "
            f"clients in the {plan.era} era over {plan.procs} worker processes, closed loop, {plan.seconds:g} s per "
            f"level and replica count in {ROUNDS} slices interleaved with the other counts' (each after {WARMUP_S:g} s "
            "of warm-up), the same replicas behind one balancer per count; a mix of skill_list, skill_load, skill_file, skills/get, "
            f"resources/read and skill_search. Clients, balancer and replicas share this machine's "
            f"{os.cpu_count()} CPUs.",
            "",
            head,
            rule,
            *rows,
        ]
    )


def docker_ready(image: str, lb_image: str) -> str | None:
    """Why the load figure cannot run here, or None."""
    for tag in (image, lb_image):
        try:
            proc = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            return "docker is not available on this machine"
        if proc.returncode != 0:
            return f"no {tag} image (`make image` / `make lb-image` build them)"
    return None


def section(image: str, lb_image: str, plan: Plan | None = None) -> str:
    """The report's "Load" section: the table, or why it was not measured."""
    plan = plan or Plan()
    if not plan.skills.is_dir():
        return f"Not measured: no skills directory at {plan.skills} (`python -m bench.load --skills DIR`)."
    problem = docker_ready(image, lb_image)
    if problem is not None:
        return f"Not measured: {problem}."
    return render(measure(image, lb_image, plan), plan)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        url, clients, max_calls, offset, era = argv[1:6]
        out = anyio.run(_worker, url, int(clients), int(max_calls), int(offset), era)
        print(json.dumps(out))
        return 0
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--image", default=os.environ.get("SKILL_MCP_IMAGE", "skill-mcp:dev"))
    p.add_argument("--lb-image", default=LB_IMAGE)
    p.add_argument("--skills", type=Path, default=DEFAULT_SKILLS, help="skills every replica serves (read-only)")
    p.add_argument("--clients", default="1,8,32,64", help="concurrent clients per level, comma-separated")
    p.add_argument("--replicas", default="1,2", help="replica counts, comma-separated (at most the config's servers)")
    p.add_argument("--seconds", type=float, default=8.0, help="measured window per level")
    p.add_argument("--procs", type=int, default=2, help="client worker processes")
    p.add_argument("--max-calls", type=int, default=2000, help="calls per client per level, at most")
    p.add_argument(
        "--era",
        choices=("2026-07-28", "legacy"),
        default="2026-07-28",
        help="the clients' protocol era (legacy: handshake sessions, balanced per session)",
    )
    args = p.parse_args(argv)
    plan = Plan(
        args.skills,
        tuple(int(c) for c in args.clients.split(",")),
        tuple(int(r) for r in args.replicas.split(",")),
        args.seconds,
        args.procs,
        args.max_calls,
        args.era,
    )
    print(section(args.image, args.lb_image, plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
