"""One benchmark target (a corpus size, or the bundled pack) measured against the floor."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.client.stdio import get_default_environment

from bench import fair
from bench.corpus import CorpusInfo
from bench.fair import RequestAt
from bench.measure import Op, alternate, floor_call, paired_runs, skills_list, structured
from bench.servers import ServerSpec, peak_rss_kib, session, transport_floor_spec

SKILL_MD = "SKILL.md"
ANSWERS_DIR = Path("/tmp/skill-mcp-bench/answers")  # the same-size floor's recorded answers


@dataclass(slots=True)
class Latency:
    floor: list[float]
    ours: list[float]
    # The same trivial call served on skill-mcp's stdio transport (per-call figures only).
    transport_floor: list[float] = field(default_factory=list)
    # The same-size floor (bench.fair): our own answer replayed, on the SDK's transport and on ours.
    same_size: list[float] = field(default_factory=list)
    same_size_transport: list[float] = field(default_factory=list)
    # Server CPU (user + system) per call, over the measured rounds and warm-ups: ours and the
    # same-size floor's. Much steadier than wall time on a loaded machine.
    ours_cpu_s: float = float("nan")
    same_size_cpu_s: float = float("nan")
    same_size_transport_cpu_s: float = float("nan")


@dataclass(slots=True)
class TargetResult:
    label: str
    skills: int
    tools: list[str] = field(default_factory=list)
    calls: dict[str, Latency] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # measurement -> why it was not measured
    first_skill_list: float = float("nan")
    skills_list_walk_cold: float = float("nan")
    skills_list_walk_warm: float = float("nan")
    skills_list_pages: int = 0
    runs: dict[str, Latency] = field(default_factory=dict)  # interpreter -> (direct spawn, skill_run)
    search_server: list[float] = field(default_factory=list)
    peak_after_all_kib: int = 0  # VmHWM once every read-side call ran (the search index is built by then)


async def _walk_skills_list(client: Any) -> tuple[list[str | None], float]:
    cursors: list[str | None] = [None]
    start = time.perf_counter()
    page = await skills_list(client)
    while page.get("nextCursor"):
        cursors.append(page["nextCursor"])
        page = await skills_list(client, page["nextCursor"])
    return cursors, time.perf_counter() - start


async def _sample(client: Any, corpus: CorpusInfo | None) -> list[tuple[str, list[str]]]:
    """(name, file paths) of up to eight skills to cycle the per-skill calls over."""
    if corpus is not None:
        names = list(corpus.sample)
    else:
        names = [e["name"] for e in structured(await client.call_tool("skill_list", {}))["skills"][:8]]
    out = []
    for name in names:
        loaded = structured(await client.call_tool("skill_load", {"name": name}))
        out.append((name, [f["path"] for f in loaded["files"]]))
    return out


def _read_requests(
    sample: list[tuple[str, list[str]]], cursors: list[str | None], queries: tuple[str, ...], tools: list[str]
) -> dict[str, RequestAt]:
    """Each read call as its i-th request (``bench.fair``: one description for ours and the
    same-size floor)."""

    def pick(i: int) -> tuple[str, list[str]]:
        return sample[i % len(sample)]

    def others(i: int) -> list[str]:
        _name, paths = pick(i)
        rest = [p for p in paths if p != SKILL_MD] or [SKILL_MD]
        return (rest * 8)[:8]

    def tool(name: str, args: Callable[[int], dict[str, Any]]) -> RequestAt:
        return lambda i: ("tools/call", {"name": name, "arguments": args(i)})

    requests: dict[str, RequestAt] = {
        "skill_list (first page)": tool("skill_list", lambda i: {}),
        "skill_load": tool("skill_load", lambda i: {"name": pick(i)[0]}),
        "skill_file (1 path)": tool("skill_file", lambda i: {"name": pick(i)[0], "paths": others(i)[:1]}),
        "skill_file (8 paths)": tool("skill_file", lambda i: {"name": pick(i)[0], "paths": others(i)}),
    }
    if "skill_search" in tools:
        requests["skill_search"] = tool("skill_search", lambda i: {"query": queries[i % len(queries)]})
    requests["skills/list (each page)"] = lambda i: ("skills/list", {"cursor": cursors[i % len(cursors)]})
    requests["skills/get"] = lambda i: ("skills/get", {"uri": f"skill://{pick(i)[0]}/{SKILL_MD}"})
    requests["resources/read"] = lambda i: ("resources/read", {"uri": f"skill://{pick(i)[0]}/{SKILL_MD}"})
    return requests


def _op(request_at: RequestAt) -> Op:
    return lambda client, i: fair.send(client, request_at(i))


async def read_side(
    result: TargetResult,
    spec: ServerSpec,
    floor: ServerSpec,
    corpus: CorpusInfo | None,
    calls: int,
    queries: tuple[str, ...],
    warmup: int = 5,
) -> None:
    async with session(floor) as f, session(transport_floor_spec()) as tf, session(spec) as s:
        tools = [t.name for t in (await s.client.list_tools()).tools]
        result.tools = tools
        await f.client.list_tools()
        await tf.client.list_tools()
        start = time.perf_counter()
        first = structured(await s.client.call_tool("skill_list", {}))
        result.first_skill_list = time.perf_counter() - start
        result.skills = int(first["total"])
        sample = await _sample(s.client, corpus)
        cursors, result.skills_list_walk_cold = await _walk_skills_list(s.client)
        _, result.skills_list_walk_warm = await _walk_skills_list(s.client)
        result.skills_list_pages = len(cursors)
        if "skill_search" not in tools:
            result.missing["skill_search"] = "this server build does not register skill_search"
        requests = _read_requests(sample, cursors, queries, tools)
        answers = await fair.record(s.client, requests, max(calls, warmup), ANSWERS_DIR / f"{result.label}.json")
        # The per-call figures are the steady state: not while the index build the recording's
        # skill_search started is still running in our server (fair.wait_idle).
        waited = await fair.wait_idle(s.pid)
        print(f"{result.label}: waited {waited:.1f} s for the server's background work", file=sys.stderr)
        async with (
            session(fair.replay_spec(answers)) as same,
            session(fair.replay_spec(answers, our_transport=True)) as same_tf,
        ):
            await same.client.list_tools()
            await same_tf.client.list_tools()
            for label, request_at in requests.items():
                pids = (s.pid, same.pid, same_tf.pid)
                cpu_before = [fair.cpu_seconds(pid) for pid in pids]
                (floor_samples, transport_samples, same_samples, same_tf_samples), ours = await alternate(
                    (f.client, tf.client),
                    s.client,
                    _op(request_at),
                    calls,
                    warmup,
                    same_op_clients=(same.client, same_tf.client),
                )
                cpu = [(fair.cpu_seconds(pid) - b) / (calls + warmup) for pid, b in zip(pids, cpu_before, strict=True)]
                lat = Latency(floor_samples, ours, transport_samples, same_samples, same_tf_samples)
                lat.ours_cpu_s, lat.same_size_cpu_s, lat.same_size_transport_cpu_s = cpu
                result.calls[label] = lat
        if s.pid is not None:
            result.peak_after_all_kib = peak_rss_kib(s.pid)


async def script_runs(result: TargetResult, spec: ServerSpec, corpus: CorpusInfo | None, runs: int) -> None:
    if "skill_run" not in result.tools:
        result.missing["skill_run"] = "this server build does not register skill_run"
        return
    if corpus is None:
        return
    env = {"MCP_CONFIRM_ELICITATION": "off"}
    server_env = get_default_environment() | dict(spec.params(env).env or {})
    async with session(spec, env) as s:
        # The direct spawn copies what the fence runs (skill_run's preview says: the interpreter it
        # resolved at boot, the script's real path, the skill's cwd, the same variable names).
        listed = structured(await s.client.call_tool("skill_list", {"limit": 1}))
        resolved = listed.get("interpreters") or {}
        for interp, where in sorted(corpus.scripts.items()):
            name, script = where.split(":", 1)
            if interp not in resolved:
                result.missing[f"skill_run ({interp})"] = f"{interp} is not installed on this machine"
                continue
            try:
                samples = await paired_runs(s.client, {"skill": name, "script": script, "args": []}, server_env, runs)
            except RuntimeError as err:
                result.missing[f"skill_run ({interp})"] = str(err)[:200]
                continue
            result.runs[interp] = Latency(samples.direct, samples.ours)


async def floor_first_call(client: Any, i: int) -> Any:
    return await floor_call(client, i)


async def ours_first_list(client: Any, i: int) -> Any:
    return await client.call_tool("skill_list", {})
