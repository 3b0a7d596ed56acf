"""Render one benchmark run as Markdown: figures, ratios to the floor, and each target's verdict."""

from __future__ import annotations

import math
import os
import platform
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from bench import peers as peer_bench
from bench.firstanswer import LIMITS as FIRST_ANSWER_LIMITS
from bench.firstanswer import FirstAnswer, paired
from bench.firstanswer import table as first_answer_table
from bench.inproc import InProc
from bench.measure import Ready
from bench.stats import Summary, ms, ratio, times
from bench.suite import Latency, TargetResult

MIB = 1024


@dataclass(slots=True)
class Run:
    started: str
    ready_runs: int
    calls: int
    ready: dict[str, Ready] = field(default_factory=dict)
    memory_kib: dict[str, int] = field(default_factory=dict)
    targets: list[TargetResult] = field(default_factory=list)
    inproc: dict[str, InProc] = field(default_factory=dict)
    appliance: str = "not measured"
    appliance_overhead_ms: float = math.nan
    load: str = "Not measured: run with --load (needs Docker, `make image` and `make lb-image`)."
    verdicts: list[str] = field(default_factory=list)
    first_answer: list[FirstAnswer] = field(default_factory=list)
    peer_runs: int = 0
    peer_names: list[str] = field(default_factory=list)
    peers: list[peer_bench.PeerCorpus] = field(default_factory=list)
    peers_note: str = ""


def _git_rev() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _verdict(run: Run, what: str, value: float, limit: float, unit: str) -> str:
    if math.isnan(value):
        line = f"- {what}: not measured (limit {limit:g}{unit})"
    else:
        ok = value <= limit
        line = f"- {what}: **{value:.2f}{unit}** (limit {limit:g}{unit}) — {'met' if ok else 'MISSED'}"
    run.verdicts.append(line)
    return line


def _ready_table(run: Run) -> list[str]:
    floor = Summary.of(run.ready["floor"].ready)
    lines = [
        "| server | skills | initialize median (ms) | ready median (ms) | ready p95 (ms) | ratio of medians "
        "| median of paired ratios |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    sizes = {t.label: t.skills for t in run.targets}
    for label, ready in run.ready.items():
        r = Summary.of(ready.ready)
        i = Summary.of(ready.initialize)
        lines.append(
            f"| {label} | {sizes.get(label, '')} | {ms(i.median)} | {ms(r.median)} | {ms(r.p95)} | "
            f"{times(ratio(r.median, floor.median))} | {times(paired_ratio(run, label))} |"
        )
    return lines


def paired_ratio(run: Run, label: str) -> float:
    """Median over repetitions of ours / floor within the same repetition.

    Each repetition starts every server back to back, so a slow spell of this shared machine
    that lasts a repetition inflates both sides of that repetition's ratio alike; the median
    of these ratios is steadier than the ratio of the two medians.
    """
    ours, floor = run.ready[label].ready, run.ready["floor"].ready
    pairs = [o / f for o, f in zip(ours, floor, strict=False) if f > 0]
    return Summary.of(pairs).median if pairs else math.nan


def _memory_table(run: Run) -> list[str]:
    floor = run.memory_kib.get("floor", 0)
    after_all = {t.label: t.peak_after_all_kib for t in run.targets}
    lines = [
        "| server | peak RSS (MiB) | above the floor (MiB) | peak after every read-side call, search index "
        "built (MiB) |",
        "|---|---:|---:|---:|",
    ]
    for label, kib in run.memory_kib.items():
        later = after_all.get(label, 0)
        lines.append(
            f"| {label} | {kib / MIB:.1f} | {(kib - floor) / MIB:+.1f} | {f'{later / MIB:.1f}' if later else ''} |"
        )
    return lines


def _transport_ratio(lat: Latency) -> float:
    """Ours against the trivial call on skill-mcp's own transport: what the catalog adds per call."""
    if not lat.transport_floor:
        return float("nan")
    return ratio(Summary.of(lat.ours).median, Summary.of(lat.transport_floor).median)


def same_size_ratio(lat: Latency, our_transport: bool = False) -> float:
    """Ours against the floor replaying our own answer (bench.fair): what our server adds per call
    beyond what the SDK spends on a payload of that size."""
    floor = lat.same_size_transport if our_transport else lat.same_size
    return ratio(Summary.of(lat.ours).median, Summary.of(floor).median) if floor else math.nan


def same_size_paired(lat: Latency) -> float:
    """Median over rounds of ours / the same-size floor in that round (each round visits both one
    after the other), steadier than the ratio of medians when the machine's load moves."""
    pairs = [o / f for o, f in zip(lat.ours, lat.same_size, strict=False) if f > 0]
    return Summary.of(pairs).median if pairs else math.nan


def _calls_table(t: TargetResult) -> list[str]:
    lines = [
        "| call | ours median (ms) | ours p95 (ms) | floor median (ms) | floor p95 (ms) | median ratio "
        "| floor on our transport, median (ms) | ratio to it | same-size floor median (ms) | ratio to it "
        "| paired | same-size floor on our transport (ms) | ratio to it | server CPU per call (ms): ours / "
        "same-size floor / same-size floor on our transport |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, lat in t.calls.items():
        o, f = Summary.of(lat.ours), Summary.of(lat.floor)
        tf = ms(Summary.of(lat.transport_floor).median) if lat.transport_floor else ""
        same = ms(Summary.of(lat.same_size).median) if lat.same_size else ""
        same_tf = ms(Summary.of(lat.same_size_transport).median) if lat.same_size_transport else ""
        lines.append(
            f"| {label} | {ms(o.median)} | {ms(o.p95)} | {ms(f.median)} | {ms(f.p95)} | "
            f"{times(ratio(o.median, f.median))} | {tf} | {times(_transport_ratio(lat))} | {same} | "
            f"{times(same_size_ratio(lat))} | {times(same_size_paired(lat))} | {same_tf} | "
            f"{times(same_size_ratio(lat, True))} | {ms(lat.ours_cpu_s)} / {ms(lat.same_size_cpu_s)} / "
            f"{ms(lat.same_size_transport_cpu_s)} |"
        )
    return lines


def _runs_table(t: TargetResult) -> list[str]:
    lines = [
        "| interpreter | direct spawn median (ms) | skill_run median (ms) | skill_run p95 (ms) | overhead (ms) |",
        "|---|---:|---:|---:|---:|",
    ]
    for interp, lat in t.runs.items():
        d, o = Summary.of(lat.floor), Summary.of(lat.ours)
        lines.append(f"| {interp} | {ms(d.median)} | {ms(o.median)} | {ms(o.p95)} | {ms(o.median - d.median)} |")
    return lines


def _targets(run: Run) -> list[str]:
    run.verdicts = []
    floor_ready = Summary.of(run.ready["floor"].ready).median
    for label, limit in (("1000", 1.10), ("10000", 1.30)):
        if label in run.ready:
            _verdict(
                run,
                f"ready at {label} skills / floor (median of paired ratios; ratio of medians "
                f"{ratio(Summary.of(run.ready[label].ready).median, floor_ready):.2f}x)",
                paired_ratio(run, label),
                limit,
                "x",
            )
    if "10000" in run.memory_kib:
        _verdict(
            run,
            "peak RSS at 10000 skills above the floor",
            (run.memory_kib["10000"] - run.memory_kib["floor"]) / MIB,
            60,
            " MiB",
        )
    for t in run.targets:
        if t.label != "10000":
            continue
        for label, lat in t.calls.items():
            if label.startswith("skills/list"):
                continue  # a whole page against a trivial call compares unlike work: judged below against the same-size floor
            _verdict(
                run,
                f"{label} median / floor's trivial tool at 10000 (against the same trivial tool on "
                f"skill-mcp's stdio transport: {_transport_ratio(lat):.2f}x)",
                ratio(Summary.of(lat.ours).median, Summary.of(lat.floor).median),
                1.5,
                "x",
            )
        for label, lat in t.calls.items():
            _verdict(
                run,
                f"{label} / the same-size floor at 10000, median of paired ratios (ratio of "
                f"medians {same_size_ratio(lat):.2f}x; against it on skill-mcp's stdio transport "
                f"{same_size_ratio(lat, True):.2f}x)",
                same_size_paired(lat),
                1.3,
                "x",
            )
    if "10000" in run.inproc:
        _verdict(
            run, "skill_search p95 server time at 10000", Summary.of(run.inproc["10000"].search).p95 * 1000, 5, " ms"
        )
    for t in run.targets:
        for interp, lat in t.runs.items():
            _verdict(
                run,
                f"skill_run overhead ({interp}, {t.label})",
                (Summary.of(lat.ours).median - Summary.of(lat.floor).median) * 1000,
                30,
                " ms",
            )
    _verdict(run, "skill_run overhead in the appliance (over docker exec)", run.appliance_overhead_ms, 60, " ms")
    _first_answer_targets(run)
    _peer_targets(run)
    return run.verdicts


def _first_answer_targets(run: Run) -> None:
    """The first-answer targets (what a user of a freshly started server waits for), each for a cold and a warm
    start: ready + the complete walk against the replaying floor's ready + the same walk, and the first search."""
    for r in run.first_answer:
        floor_rss = Summary.of([float(k) for k in r.floor_rss_kib]).median if r.floor_rss_kib else math.nan
        for name, mode in (("cold", r.cold), ("warm", r.warm)):
            limits = FIRST_ANSWER_LIMITS.get(r.label, {}).get(name)
            if limits is not None and mode.walk:
                _verdict(
                    run,
                    f"ready + complete skill_list walk at {r.label}, {name} / the replaying floor's ready + "
                    f"the same walk, median of paired ratios (ratio of medians "
                    f"{ratio(Summary.of(mode.walk).median, Summary.of(r.floor_walk).median):.2f}x)",
                    paired(mode.walk, r.floor_walk),
                    limits[0],
                    "x",
                )
            if limits is not None and mode.search:
                _verdict(
                    run,
                    f"first skill_search after ready at {r.label}, {name}",
                    Summary.of(mode.search).median,
                    limits[1],
                    " s",
                )
            if r.label == "10000" and mode.rss_kib:
                _verdict(
                    run,
                    f"peak RSS at 10000 above the floor, {name} (after the walk)",
                    (Summary.of([float(k) for k in mode.rss_kib]).median - floor_rss) / MIB,
                    60,
                    " MiB",
                )


def _peer_targets(run: Run) -> None:
    """First on ready + the first full list answer, cold and warm, at every corpus the peers were measured on."""
    for r in run.peers:
        if len(peer_bench.rank(r, "warm")) < 2:
            run.verdicts.append(
                f"- first on ready + first full list answer at {r.label}: not measured (no peer "
                f"answered; not set up: {', '.join(r.skipped) or 'none'}; failed: "
                f"{', '.join(r.failed) or 'none'})"
            )
            continue
        for mode in ("warm", "cold"):
            order = peer_bench.rank(r, mode)
            place = [name for name, _ in order].index(f"ours ({mode})") + 1
            ahead = ", ".join(f"{name} {ms(t)} ms" for name, t in order[: place - 1])
            failed = [n for n in r.failed if not n.startswith("ours")]
            line = (
                f"- first on ready + first full list answer at {r.label}, {mode}: ours "
                f"{ms(Summary.of(r.servers[f'ours ({mode})'].answer).median)} ms, place **{place} of "
                f"{len(order)}**{f' (behind {ahead})' if ahead else ''} — {'met' if place == 1 else 'MISSED'}"
            )
            if failed:
                line += f"; failed: {', '.join(failed)}"
            if r.skipped:
                line += f"; not set up: {', '.join(r.skipped)}"
            run.verdicts.append(line)


def render(run: Run) -> str:
    out = [
        f"# skill-mcp benchmark — {run.started}",
        "",
        f"Commit {_git_rev()}; Python {platform.python_version()}; mcp {metadata.version('mcp')}; "
        f"{os.cpu_count()} CPUs; {run.ready_runs} ready runs per server; {run.calls} calls per figure. "
        "All times through the SDK's own client over stdio (handshake era), servers interleaved; "
        "ratios are to the floor server (same SDK, one trivial tool, no catalog) measured in this run. "
        "Per-call figures also visit a second floor, the same trivial server on skill-mcp's stdio transport, "
        "which writes on the event loop where the SDK's writer takes two worker-thread hops per message: "
        "the ratio to it is what the catalog adds per call, the transport's saving taken out. "
        "The same-size floor (bench/fair.py) answers each read request with the answer our server gave to "
        "the identical request, recorded beforehand: the SDK's cost for a payload of our size and shape, on "
        "the SDK's transport and on ours.",
        "",
        "## Targets",
        "",
        *_targets(run),
        "",
        "## Ready: spawn → initialize → tools/list",
        "",
        *_ready_table(run),
        "",
        "## Peak memory after the first skill_list and a ping (floor: after its first call and a ping)",
        "",
        *_memory_table(run),
        "",
    ]
    for t in run.targets:
        out += [
            f"## Per-call latency: {t.label} ({t.skills} skills)",
            "",
            f"First skill_list after start: {ms(t.first_skill_list)} ms. skills/list, every page "
            f"({t.skills_list_pages} pages): {ms(t.skills_list_walk_cold)} ms the first time (digests computed), "
            f"{ms(t.skills_list_walk_warm)} ms the second.",
            "",
            *_calls_table(t),
            "",
        ]
        if t.runs:
            out += [
                f"### skill_run of a no-op script ({t.label}), second call of the token round trip",
                "",
                *_runs_table(t),
                "",
            ]
        if t.missing:
            out += ["Not measured: " + "; ".join(f"{k}: {v}" for k, v in t.missing.items()), ""]
    if run.inproc:
        out += [
            "## In-process (server time)",
            "",
            "| target | catalog scan (ms) | search index build (ms) | search median (ms) | search p95 (ms) |",
            "|---|---:|---:|---:|---:|",
        ]
        for label, ip in run.inproc.items():
            s = Summary.of(ip.search)
            out.append(f"| {label} | {ms(ip.scan_s)} | {ms(ip.index_build_s)} | {ms(s.median)} | {ms(s.p95)} |")
        out.append("")
    if run.first_answer:
        out += [
            "## The first answer, cold and warm",
            "",
            "Our pages are recorded once (`tools/list` and every `skill_list` page of 200, as our server "
            "answered them); then per repetition the replaying floor (`bench/floor.py --replay`: the same SDK "
            "answering each with our recorded bytes from memory; its load of the recording, before the "
            "handshake, is subtracted), ours cold (an empty catalog cache directory) and ours warm (a cache "
            "an earlier start filled), rotating who goes first. *ready + walk*: spawn → initialize → "
            "tools/list → every skill_list page. The verdict is the median over repetitions of ours / the "
            "floor in the same repetition. *first search*: a second start, from tools/list answered to the "
            "first skill_search answered. Peak RSS after the walk, less the trivial floor's. The last column "
            "divides what ours takes above the floor by the number of skills: where it stays flat from "
            "1,000 to 100,000 skills, that start is O(N). Which costs those are, cold and warm, and why they "
            'are still paid at a start: bench/README.md, "What is O(N) at start-up and what is lazy" and '
            '"What stays O(N) at a start".',
            "",
            *first_answer_table(run.first_answer),
            "",
        ]
    out += ["## Peers side by side: ready + the first full list answer", ""]
    if run.peers:
        out += [
            f"Per corpus and repetition ({run.peer_runs} per corpus), each server is started through the "
            "SDK's stdio client and timed from spawn through initialize → tools/list (*ready*) to its first "
            "full list answer, ours cold, ours warm and every peer in turn, rotating who goes first. None of "
            "the peers keeps anything between starts, so its one figure stands for its cold and warm start "
            "alike (the page cache is warm for all). Medians; *skills listed*: how many the answer named. "
            "`python -m bench.peers --setup` makes the peers' venvs.",
            "",
            *peer_bench.what_table([peer_bench.PEERS[n] for n in run.peer_names]),
            "",
            *peer_bench.table(run.peers),
            "",
        ]
    if run.peers_note:
        out += [run.peers_note.strip(), ""]
    out += ["## Appliance", "", run.appliance, ""]
    out += ["## Load: concurrent HTTP clients through HAProxy, one replica and two (bench/load.py)", "", run.load, ""]
    return "\n".join(out)
