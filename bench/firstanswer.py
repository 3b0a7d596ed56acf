"""The first answer: what a user of a freshly started server waits for, beside a floor that sends the same bytes.

For each corpus, our pages are recorded once (``tools/list`` and every page of a complete
``skill_list`` walk at its largest page size, 200, as our server answered them), and three
servers are then visited in turn per repetition, rotating who goes first:

- the **replaying floor** (``bench/floor.py --replay``, as ``bench.fair`` uses it for the read
  calls): the same SDK answering ``tools/list`` and each page with our recorded answer from
  memory. Its *ready + walk* is what any SDK server pays to hand a client those exact pages
  (the client's parse of 50 pages included); the time it took to load the recording, before it
  served the handshake, is measured by the floor itself and subtracted;
- ours **cold**: a new, empty catalog cache directory (nothing cached; the server writes one);
- ours **warm**: a cache directory earlier starts filled, the catalog cache and the persisted
  search index (the corpus is unchanged since).

Per start: *ready* (spawn → ``initialize`` → ``tools/list``) and *ready + walk* (→ the last
``skill_list`` page); the verdict is the median over repetitions of ours / the floor in the same
repetition (a slow spell of the shared machine lands on both sides of one ratio). In a second
start of ours: the *first search* (from ``tools/list`` answered to the first ``skill_search``
answered), asked at once; in a third, the same search asked after ``HOST_PAUSE_S`` of quiet, as a
host asks once its model has read the tools (the server builds the catalog and opens its index
meanwhile: docs/architecture.md, "Start-up", step 6). Peak RSS (``VmHWM``) after the walk and a request only the SDK answers (the server
whole), less that of the trivial floor (``bench/floor.py``, one start per corpus; the replaying
floor holds every page and is no memory floor).

    python -m bench.firstanswer --sizes 1000,10000 --runs 3
    python -m bench.firstanswer --sizes 100000 --runs 1 --no-search   # the 100k figures
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bench import corpus as corpora
from bench import fair
from bench.measure import floor_call, structured
from bench.servers import CALL_TIMEOUT_S, FLOOR_FILE, ServerSpec, floor_spec, ours_spec, peak_rss_kib, session, whole
from bench.stats import Summary, ms, ratio, times

PAGE = 200  # skill_list's largest page (surfaces.paging.MAX_LIST_LIMIT)
# How long a host is quiet between tools/list and its first tool call in the paused start: a
# model's first turn. Long enough for a 10,000-skill catalog built with nothing cached.
HOST_PAUSE_S = 3.0


@dataclass(slots=True)
class Mode:
    walk: list[float] = field(default_factory=list)  # spawn -> tools/list -> every skill_list page
    ready: list[float] = field(default_factory=list)  # spawn -> tools/list, in the same starts
    search: list[float] = field(default_factory=list)  # tools/list answered -> first skill_search answered
    paused: list[float] = field(default_factory=list)  # the same, asked HOST_PAUSE_S after tools/list
    rss_kib: list[int] = field(default_factory=list)


@dataclass(slots=True)
class FirstAnswer:
    label: str
    skills: int = 0
    pages: int = 0
    # The replaying floor, its load of the recording taken out; one sample per repetition, in
    # step with cold.walk and warm.walk (the pairs of the paired ratios).
    floor_ready: list[float] = field(default_factory=list)
    floor_walk: list[float] = field(default_factory=list)
    floor_load: list[float] = field(default_factory=list)  # the time subtracted, for the record
    floor_rss_kib: list[int] = field(default_factory=list)  # the trivial floor's, once per corpus
    recorded_bytes: int = 0  # the recorded answers (tools/list and every page) as JSON
    cold: Mode = field(default_factory=Mode)
    warm: Mode = field(default_factory=Mode)


def cached_spec(label: str, root: Path, cache_dir: Path) -> ServerSpec:
    base = ours_spec(label, root)
    return ServerSpec(base.label, base.command, {"SKILL_MCP_CACHE_DIR": str(cache_dir)})


def page_args(cursor: str | None) -> dict[str, Any]:
    return {"limit": PAGE} if cursor is None else {"limit": PAGE, "cursor": cursor}


async def walk(client: Any) -> tuple[int, int]:
    """(skills, pages) of a complete skill_list walk, through the client's own ``call_tool``."""
    pages, total, cursor = 0, 0, None
    while True:
        page = structured(await client.call_tool("skill_list", page_args(cursor)))
        pages += 1
        total += len(page["skills"])
        cursor = page.get("nextCursor")
        if not cursor:
            return total, pages


async def record_walk(client: Any, out: Path) -> int:
    """Our ``tools/list`` and every page of the walk as the wire carried them (``bench.fair``'s
    format, read by ``bench/floor.py --replay``); returns the file's size."""
    answers: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("tools/list", {}, await fair.raw(client, "tools/list", {}))
    ]
    cursor: str | None = None
    while True:
        params = {"name": "skill_list", "arguments": page_args(cursor)}
        page = await fair.raw(client, "tools/call", params)
        answers.append(("tools/call", params, page))
        cursor = (page.get("structuredContent") or {}).get("nextCursor")
        if not cursor:
            break
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"answers": answers}), encoding="utf-8")
    return out.stat().st_size


def replay_floor_spec(answers: Path, load_time: Path) -> ServerSpec:
    return ServerSpec(
        "replaying floor", (sys.executable, str(FLOOR_FILE), "--replay", str(answers), "--load-time", str(load_time))
    )


def _timeout(skills: int) -> float:
    """A first call at 100,000 skills scans for minutes on a loaded machine: wait in proportion."""
    return max(CALL_TIMEOUT_S, skills * 0.01)


async def _trivial_floor_rss(result: FirstAnswer) -> None:
    async with session(floor_spec()) as s:
        await s.client.list_tools()
        await floor_call(s.client, 0)
        if s.pid is not None:
            result.floor_rss_kib.append(peak_rss_kib(s.pid))


async def _replaying_floor(result: FirstAnswer, answers: Path, skills: int) -> None:
    load_file = answers.with_suffix(".load")
    load_file.unlink(missing_ok=True)
    async with session(replay_floor_spec(answers, load_file), timeout_s=_timeout(skills)) as s:
        await s.client.list_tools()
        ready = time.perf_counter()
        got, _pages = await walk(s.client)
        done = time.perf_counter()
    if got != result.skills:
        raise RuntimeError(f"the replaying floor listed {got} skills, ours {result.skills}")
    load = float(load_file.read_text(encoding="ascii"))
    result.floor_load.append(load)
    result.floor_ready.append(ready - s.spawned_at - load)
    result.floor_walk.append(done - s.spawned_at - load)


async def _ours_walk(result: FirstAnswer, mode: Mode, spec: ServerSpec, skills: int) -> None:
    async with session(spec, timeout_s=_timeout(skills)) as s:
        await s.client.list_tools()
        ready = time.perf_counter()
        result.skills, result.pages = await walk(s.client)
        mode.walk.append(time.perf_counter() - s.spawned_at)
        mode.ready.append(ready - s.spawned_at)
        await whole(s.client)  # the peak of the whole server, its SDK in, as the floor's
        if s.pid is not None:
            mode.rss_kib.append(peak_rss_kib(s.pid))


async def _ours_search(mode: Mode, spec: ServerSpec, query: str, skills: int, pause: float = 0.0) -> None:
    async with session(spec, timeout_s=_timeout(skills)) as s:
        await s.client.list_tools()
        if pause:
            await anyio.sleep(pause)
        start = time.perf_counter()
        structured(await s.client.call_tool("skill_search", {"query": query}))
        (mode.paused if pause else mode.search).append(time.perf_counter() - start)


async def _fill_search(spec: ServerSpec, query: str, skills: int) -> None:
    """A start that stays until its search index is complete, and so persisted: the first answer
    of a two-phase build is partial, and a server that exits before the bodies are in persists
    nothing (docs/search.md), which would leave "warm" cold."""
    async with session(spec, timeout_s=_timeout(skills)) as s:
        await s.client.list_tools()
        while structured(await s.client.call_tool("skill_search", {"query": query})).get("coverage") == "partial":
            await anyio.sleep(0.5)
        await anyio.sleep(1.0)


async def measure(label: str, root: Path, runs: int, query: str | None, skills: int = 0) -> FirstAnswer:
    """``skills``: the corpus size, which scales the wait for a first answer."""
    result = FirstAnswer(label)
    warm_dir = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-warm-"))
    answers = warm_dir.with_name(warm_dir.name + "-pages.json")
    try:
        warm = cached_spec(label, root, warm_dir)
        await _ours_walk(result, Mode(), warm, skills)  # the earlier start that fills the cache
        if query is not None:  # and the one that persists the search index beside it
            await _fill_search(warm, query, skills)
        async with session(warm, timeout_s=_timeout(skills)) as s:  # our pages, once, for the floor
            result.recorded_bytes = await record_walk(s.client, answers)
        await _trivial_floor_rss(result)
        for rep in range(runs):
            cold_dir = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-cold-"))
            cold = cached_spec(label, root, cold_dir)
            visits: list[Callable[[], Awaitable[None]]] = [
                partial(_replaying_floor, result, answers, skills),
                partial(_ours_walk, result, result.cold, cold, skills),
                partial(_ours_walk, result, result.warm, warm, skills),
            ]
            for visit in visits[rep % 3 :] + visits[: rep % 3]:
                await visit()
            shutil.rmtree(cold_dir, ignore_errors=True)
            if query is not None:
                for pause in (0.0, HOST_PAUSE_S):
                    cold_dir = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-cold-"))
                    await _ours_search(result.cold, cached_spec(label, root, cold_dir), query, skills, pause)
                    shutil.rmtree(cold_dir, ignore_errors=True)
                    await _ours_search(result.warm, warm, query, skills, pause)
    finally:
        shutil.rmtree(warm_dir, ignore_errors=True)
        answers.unlink(missing_ok=True)
        answers.with_suffix(".load").unlink(missing_ok=True)
    return result


def _med(values: Sequence[float]) -> float:
    return Summary.of(values).median if values else float("nan")


def paired(ours: Sequence[float], floor: Sequence[float]) -> float:
    """Median over repetitions of ours / the floor in the same repetition."""
    pairs = [o / f for o, f in zip(ours, floor, strict=False) if f > 0]
    return Summary.of(pairs).median if pairs else math.nan


# The targets: ready + the complete walk over the replaying floor's ready + walk (median of
# paired ratios), and the first search after ready (seconds), per corpus and mode.
LIMITS: dict[str, dict[str, tuple[float, float]]] = {
    "1000": {"warm": (1.1, 0.1), "cold": (1.25, 0.3)},
    "10000": {"warm": (1.3, 0.3), "cold": (3.0, 3.0)},
}


def table(results: Sequence[FirstAnswer]) -> list[str]:
    lines = [
        "| corpus | skills | pages | mode | floor ready (ms) | floor ready + walk (ms) | ours ready (ms) "
        "| ours ready + walk (ms) | ÷ floor, median of paired ratios | ratio of medians | limit "
        f"| first search after ready (ms) | limit (ms) | the same, asked {HOST_PAUSE_S:g} s after ready (ms) "
        "| peak RSS − floor (MiB) | above the floor per skill: time (µs), RSS (KiB) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        floor_rss = _med([float(k) for k in r.floor_rss_kib])
        for name, mode in (("cold", r.cold), ("warm", r.warm)):
            limits = LIMITS.get(r.label, {}).get(name)
            walk_s = _med(mode.walk)
            rss_kib = _med([float(k) for k in mode.rss_kib]) - floor_rss
            rss = rss_kib / 1024
            # What grows with N: ours' ready + walk less the floor's, and the RSS above the floor,
            # per skill (flat across sizes = linear in N; bench/README.md says which costs they are).
            per_skill_us = (walk_s - _med(r.floor_walk)) / r.skills * 1e6 if r.skills else math.nan
            per_skill = "n/a" if math.isnan(per_skill_us) else f"{per_skill_us:.0f}, {rss_kib / r.skills:.2f}"
            lines.append(
                f"| {r.label} | {r.skills} | {r.pages} | {name} | {ms(_med(r.floor_ready))} "
                f"| {ms(_med(r.floor_walk))} | {ms(_med(mode.ready))} | {ms(walk_s)} "
                f"| {times(paired(mode.walk, r.floor_walk))} | {times(ratio(walk_s, _med(r.floor_walk)))} "
                f"| {f'{limits[0]:g}x' if limits else ''} | {ms(_med(mode.search))} "
                f"| {f'{limits[1] * 1000:g}' if limits else ''} | {ms(_med(mode.paused))} | {rss:.1f} | {per_skill} |"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.firstanswer", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000", help="corpus sizes, comma-separated")
    p.add_argument("--runs", type=int, default=3, help="repetitions per corpus (default 3)")
    p.add_argument("--no-search", action="store_true", help="leave out the first-search figure")
    p.add_argument("--cache", type=Path, default=Path("/tmp/skill-mcp-bench"), help="where corpora are kept")
    args = p.parse_args(argv)
    results = []
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):
        root = args.cache / f"corpus-{n}"
        if not corpora.stamped(root, n):  # regenerating a stamped corpus's text alone takes minutes at 100k
            root = corpora.generate(root, n).root
        print(f"first answer at {n}: {args.runs} runs", file=sys.stderr)
        results.append(anyio.run(measure, str(n), root, args.runs, None if args.no_search else corpora.queries()[0], n))
    print("\n".join(table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
