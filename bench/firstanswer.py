"""The first answer: what a user of a freshly started server waits for.

For each corpus, three servers are visited in turn per repetition, rotating who goes first:

- the **floor**: spawn → ``initialize`` → ``tools/list`` (its *ready*), then one trivial call
  for its peak RSS;
- ours **cold**: a new, empty catalog cache directory (nothing cached; the server writes one);
- ours **warm**: a cache directory earlier starts filled, the catalog cache and the persisted
  search index (the corpus is unchanged since).

For ours, two figures per start: *ready + walk* (spawn → ``initialize`` → ``tools/list`` →
every page of ``skill_list`` at its largest page size, the complete listing a client walks)
and, in a second start, the *first search* (from ``tools/list`` answered to the first
``skill_search`` answered). The peak RSS (``VmHWM``) of each server is read after its walk.

    python -m bench.firstanswer --sizes 1000,10000 --runs 5
    python -m bench.firstanswer --sizes 100000 --runs 2 --no-search   # the 100k figures
"""

from __future__ import annotations

import argparse
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
from bench.measure import floor_call, structured
from bench.servers import CALL_TIMEOUT_S, ServerSpec, floor_spec, ours_spec, peak_rss_kib, session
from bench.stats import Summary, ms, ratio, times

PAGE = 200  # skill_list's largest page (surfaces.paging.MAX_LIST_LIMIT)


@dataclass(slots=True)
class Mode:
    walk: list[float] = field(default_factory=list)  # spawn -> tools/list -> every skill_list page
    ready: list[float] = field(default_factory=list)  # spawn -> tools/list, in the same starts
    search: list[float] = field(default_factory=list)  # tools/list answered -> first skill_search answered
    rss_kib: list[int] = field(default_factory=list)


@dataclass(slots=True)
class FirstAnswer:
    label: str
    skills: int = 0
    pages: int = 0
    floor_ready: list[float] = field(default_factory=list)
    floor_rss_kib: list[int] = field(default_factory=list)
    cold: Mode = field(default_factory=Mode)
    warm: Mode = field(default_factory=Mode)


def cached_spec(label: str, root: Path, cache_dir: Path) -> ServerSpec:
    base = ours_spec(label, root)
    return ServerSpec(base.label, base.command, {"SKILL_MCP_CACHE_DIR": str(cache_dir)})


async def _walk(client: Any) -> tuple[int, int]:
    """(skills, pages) of a complete skill_list walk."""
    pages, total, cursor = 0, 0, None
    while True:
        args: dict[str, Any] = {"limit": PAGE} if cursor is None else {"limit": PAGE, "cursor": cursor}
        page = structured(await client.call_tool("skill_list", args))
        pages += 1
        total += len(page["skills"])
        cursor = page.get("nextCursor")
        if not cursor:
            return total, pages


def _timeout(skills: int) -> float:
    """A first call at 100,000 skills scans for minutes on a loaded machine: wait in proportion."""
    return max(CALL_TIMEOUT_S, skills * 0.01)


async def _floor(result: FirstAnswer) -> None:
    async with session(floor_spec()) as s:
        await s.client.list_tools()
        result.floor_ready.append(time.perf_counter() - s.spawned_at)
        await floor_call(s.client, 0)
        if s.pid is not None:
            result.floor_rss_kib.append(peak_rss_kib(s.pid))


async def _ours_walk(result: FirstAnswer, mode: Mode, spec: ServerSpec, skills: int) -> None:
    async with session(spec, timeout_s=_timeout(skills)) as s:
        await s.client.list_tools()
        ready = time.perf_counter()
        result.skills, result.pages = await _walk(s.client)
        mode.walk.append(time.perf_counter() - s.spawned_at)
        mode.ready.append(ready - s.spawned_at)
        if s.pid is not None:
            mode.rss_kib.append(peak_rss_kib(s.pid))


async def _ours_search(mode: Mode, spec: ServerSpec, query: str, skills: int) -> None:
    async with session(spec, timeout_s=_timeout(skills)) as s:
        await s.client.list_tools()
        start = time.perf_counter()
        structured(await s.client.call_tool("skill_search", {"query": query}))
        mode.search.append(time.perf_counter() - start)


async def measure(label: str, root: Path, runs: int, query: str | None, skills: int = 0) -> FirstAnswer:
    """``skills``: the corpus size, which scales the wait for a first answer."""
    result = FirstAnswer(label)
    warm_dir = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-warm-"))
    try:
        warm = cached_spec(label, root, warm_dir)
        await _ours_walk(FirstAnswer(label), Mode(), warm, skills)  # the earlier start that fills the cache
        if query is not None:  # and the one that persists the search index beside it
            await _ours_search(Mode(), warm, query, skills)
        for rep in range(runs):
            cold_dir = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-cold-"))
            cold = cached_spec(label, root, cold_dir)
            visits: list[Callable[[], Awaitable[None]]] = [
                partial(_floor, result), partial(_ours_walk, result, result.cold, cold, skills),
                partial(_ours_walk, result, result.warm, warm, skills)]
            for visit in visits[rep % 3:] + visits[:rep % 3]:
                await visit()
            shutil.rmtree(cold_dir, ignore_errors=True)
            if query is not None:
                cold_dir = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-cold-"))
                await _ours_search(result.cold, cached_spec(label, root, cold_dir), query, skills)
                shutil.rmtree(cold_dir, ignore_errors=True)
                await _ours_search(result.warm, warm, query, skills)
    finally:
        shutil.rmtree(warm_dir, ignore_errors=True)
    return result


def _med(values: Sequence[float]) -> float:
    return Summary.of(values).median if values else float("nan")


def table(results: Sequence[FirstAnswer]) -> list[str]:
    lines = ["| corpus | skills | pages | floor ready (ms) | mode | ready (ms) | ready + walk (ms) | ÷ floor ready "
             "| first search after ready (ms) | peak RSS − floor (MiB) |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in results:
        floor = _med(r.floor_ready)
        floor_rss = _med([float(k) for k in r.floor_rss_kib])
        for name, mode in (("cold", r.cold), ("warm", r.warm)):
            walk = _med(mode.walk)
            rss = (_med([float(k) for k in mode.rss_kib]) - floor_rss) / 1024
            lines.append(f"| {r.label} | {r.skills} | {r.pages} | {ms(floor)} | {name} | {ms(_med(mode.ready))} "
                         f"| {ms(walk)} | {times(ratio(walk, floor))} | {ms(_med(mode.search))} | {rss:.1f} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.firstanswer", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000", help="corpus sizes, comma-separated")
    p.add_argument("--runs", type=int, default=5, help="repetitions per corpus (default 5)")
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
