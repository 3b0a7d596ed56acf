"""``python -m bench``: generate the corpora, measure every server against the floor, write Markdown.

python -m bench                      # N = 100, 1,000, 10,000 and the bundled pack; first answer
                                     # also at 100,000; the peers at the public collections, 1,000, 10,000
python -m bench --sizes 100 --quick  # the CI smoke run
python -m bench --peers-only         # only the peers side by side
python -m bench --first-answer-only --sizes 1000,10000 --large ""   # only the first-answer figures
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from bench import corpus as corpora
from bench import peers as peer_bench
from bench.firstanswer import measure as measure_first_answer
from bench.inproc import measure as measure_inproc
from bench.measure import peak_memory, ready_runs
from bench.report import Run, render
from bench.servers import floor_spec, ours_spec
from bench.suite import TargetResult, floor_first_call, ours_first_list, read_side, script_runs

RESULTS = Path(__file__).with_name("results")
RAW = Path(__file__).resolve().parent.parent / "build" / "bench"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--sizes", default="100,1000,10000", help="corpus sizes, comma-separated")
    p.add_argument("--no-pack", action="store_true", help="leave out the bundled pack")
    p.add_argument("--ready-runs", type=int, default=10, help="ready measurements per server (default 10)")
    p.add_argument("--calls", type=int, default=200, help="calls per per-call figure (default 200)")
    p.add_argument("--run-calls", type=int, default=30, help="skill_run calls per interpreter (default 30)")
    p.add_argument("--search-calls", type=int, default=1000, help="in-process search queries (default 1000)")
    p.add_argument("--ready-only", action="store_true", help="measure only ready (spawn -> tools/list)")
    p.add_argument(
        "--first-answer-runs",
        type=int,
        default=3,
        help="repetitions of the cold/warm first-answer figures per corpus (default 3; 0 leaves them out)",
    )
    p.add_argument(
        "--first-answer-only",
        action="store_true",
        help="measure only the first-answer figures (and the peers unless --peers none)",
    )
    p.add_argument(
        "--large",
        default="100000",
        help="corpus sizes measured for the first answer only, beside --sizes (default 100000; '' none)",
    )
    p.add_argument(
        "--peers",
        default="all",
        help=f"peers to measure side by side: all, none, or some of {','.join(peer_bench.PEERS)}",
    )
    p.add_argument("--peers-only", action="store_true", help="measure only the peers side by side")
    p.add_argument(
        "--peer-corpora",
        default="public,1000,10000",
        help="corpora of the peers' figures: 'public' and/or sizes (default public,1000,10000)",
    )
    p.add_argument("--peer-runs", type=int, default=3, help="repetitions of the peers' figures (default 3)")
    p.add_argument(
        "--peers-dir",
        type=Path,
        default=peer_bench.PEERS_DIR,
        help="where `python -m bench.peers --setup` made the peers' venvs",
    )
    p.add_argument(
        "--public",
        type=Path,
        default=Path(os.environ.get("SKILL_MCP_PUBLIC_SKILLS", "build/public-skills")),
        help="where the public collections are unpacked (as bench.search_quality)",
    )
    p.add_argument("--no-appliance", action="store_true", help="skip the container figures")
    p.add_argument(
        "--load",
        action="store_true",
        help="also the load figure through HAProxy on 1 and 2 appliance replicas (needs Docker; bench/load.py)",
    )
    p.add_argument("--load-seconds", type=float, default=8.0, help="measured window per load level (default 8)")
    p.add_argument("--quick", action="store_true", help="few repetitions: the CI smoke run")
    p.add_argument("--cache", type=Path, default=Path("/tmp/skill-mcp-bench"), help="where corpora are kept")
    p.add_argument("--out", type=Path, default=None, help="Markdown file to write (default bench/results/<stamp>.md)")
    p.add_argument(
        "--raw",
        type=Path,
        nargs="?",
        const=RAW,
        default=None,
        help="also write the raw samples as JSON: to this file, or with no value to "
        "build/bench/<stamp>.json (never committed)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.ready_runs, args.calls, args.run_calls, args.search_calls = 3, 20, 3, 50
        args.first_answer_runs = min(args.first_answer_runs, 1)
        args.peer_runs = min(args.peer_runs, 1)
        if "--large" not in (argv if argv is not None else sys.argv):
            args.large = ""
        if "--peer-corpora" not in (argv if argv is not None else sys.argv):
            args.peer_corpora = args.sizes
    return args


def _appliance(enabled: bool) -> tuple[str, float]:
    """The appliance figures from ``container/measure.py`` (run inside the image) when the image exists.

    Returns the report text and skill_run's overhead over ``docker exec`` in ms (NaN if none).
    """
    if not enabled:
        return "Not measured: --no-appliance.", math.nan
    try:
        out = subprocess.run(
            ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return "Not measured: docker is not available on this machine.", math.nan
    if out.returncode != 0 or "skill-mcp:dev" not in out.stdout.split():
        return "Not measured: no skill-mcp:dev image on this machine (`make image` builds it).", math.nan
    script = Path(__file__).resolve().parents[1] / "container" / "measure.py"
    try:
        proc = subprocess.run(
            [sys.executable, str(script), "skill-mcp:dev"], capture_output=True, text=True, timeout=900
        )
        figures = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        return f"Not measured: container/measure.py failed ({err}).", math.nan
    overhead = figures["skillRunMedianMs"] - figures["dockerExecMedianMs"]
    rows = "\n".join(f"| {k} | {v} |" for k, v in figures.items())
    return (
        "Measured by `container/measure.py` (docker run → initialize, median of 5; skill_run of a trivial "
        "script after confirmation vs `docker exec` of it in the same container, median of 20):\n\n"
        f"| figure | value |\n|---|---|\n{rows}\n\nskill_run over docker exec: {overhead:.1f} ms"
    ), overhead


def _sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


async def run_all(args: argparse.Namespace) -> Run:
    run = Run(
        started=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        ready_runs=args.ready_runs,
        calls=args.calls,
        peer_runs=args.peer_runs,
    )
    floor = floor_spec()
    if args.peers_only:
        await _peers(run, args)
        run.ready = await ready_runs([floor], 1)
        run.appliance = "Not measured: --peers-only."
        return run
    infos = {str(n): corpora.generate(args.cache / f"corpus-{n}", n) for n in _sizes(args.sizes)}
    specs = [ours_spec(label, info.root) for label, info in infos.items()]
    if not args.no_pack:
        specs.append(ours_spec("pack", None))
    large = {str(n): _large_corpus(args.cache, n) for n in _sizes(args.large) if str(n) not in infos}
    if args.first_answer_only:
        await _first_answers(run, {**infos, **large}, args.first_answer_runs)
        await _peers(run, args)
        run.ready = await ready_runs([floor], 1)
        run.appliance = "Not measured: --first-answer-only."
        return run
    print(f"ready: {args.ready_runs} runs x {len(specs) + 1} servers", file=sys.stderr)
    run.ready = await ready_runs([floor, *specs], args.ready_runs)
    if args.ready_only:
        run.appliance = "Not measured: --ready-only."
        return run
    run.memory_kib["floor"] = await peak_memory(floor, floor_first_call)
    queries = next(iter(infos.values())).queries if infos else ("search skills",)
    for spec in specs:
        info = infos.get(spec.label)
        print(f"{spec.label}: memory, per-call latency, skill_run", file=sys.stderr)
        run.memory_kib[spec.label] = await peak_memory(spec, ours_first_list)
        result = TargetResult(spec.label, info.n if info else 0)
        await read_side(result, spec, floor, info, args.calls, queries)
        await script_runs(result, spec, info, args.run_calls)
        run.targets.append(result)
        run.inproc[spec.label] = measure_inproc(info.root if info else None, queries, args.search_calls)
    await _first_answers(run, {**infos, **large}, args.first_answer_runs)
    await _peers(run, args)
    run.appliance, run.appliance_overhead_ms = _appliance(not args.no_appliance)
    if args.load:
        from bench import load
        from bench.cluster import LB_IMAGE

        image = os.environ.get("SKILL_MCP_IMAGE", "skill-mcp:dev")
        # Its own event loops (one per level), so off this one: in a worker thread.
        run.load = await anyio.to_thread.run_sync(load.section, image, LB_IMAGE, load.Plan(seconds=args.load_seconds))
    return run


def _large_corpus(cache: Path, n: int) -> corpora.CorpusInfo:
    """A first-answer-only corpus (100,000 skills: about 1.8 GB, minutes to write; reused once stamped)."""
    root = cache / f"corpus-{n}"
    if corpora.stamped(root, n):  # regenerating a stamped corpus's text alone takes minutes at 100k
        return corpora.CorpusInfo(root, n, 0, 0, {}, (), corpora.queries())
    print(f"{n}: writing the corpus (minutes at 100,000)", file=sys.stderr)
    return corpora.generate(root, n)


async def _first_answers(run: Run, infos: dict[str, corpora.CorpusInfo], runs: int) -> None:
    for label, info in infos.items() if runs > 0 else ():
        print(f"{label}: the first answer, cold and warm ({runs} runs)", file=sys.stderr)
        run.first_answer.append(await measure_first_answer(label, info.root, runs, info.queries[0], info.n))


async def _peers(run: Run, args: argparse.Namespace) -> None:
    """Ours beside every selected peer (``bench.peers``); a corpus that is not there is noted, not measured."""
    selected = peer_bench.select(args.peers)
    run.peer_names = [p.name for p in selected]
    if not selected or args.peer_runs <= 0:
        run.peers_note = "Not measured: --peers none." if not selected else "Not measured: --peer-runs 0."
        return
    labels = [c for c in args.peer_corpora.split(",") if c.strip()]
    for label, root, skills in peer_bench.corpus_roots(labels, args.cache, args.public):
        if root is None:
            run.peers_note += (
                f"The public collections are not unpacked under {args.public} (`--public`, "
                "`$SKILL_MCP_PUBLIC_SKILLS`): not measured there. "
            )
            continue
        print(f"peers at {label}: {args.peer_runs} runs", file=sys.stderr)
        run.peers.append(await peer_bench.measure(label, root, args.peer_runs, selected, args.peers_dir, skills))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    run = anyio.run(run_all, args)
    text = render(run)
    out = args.out or RESULTS / f"{run.started.replace(' ', '-').replace(':', '')}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n", encoding="utf-8")
    # The raw samples, asked for with --raw, go to the ignored build directory, so a figure can be
    # recomputed another way later without committing megabytes of samples: the repository keeps
    # the Markdown reports only.
    raw = None
    if args.raw is not None:
        raw = args.raw / out.with_suffix(".json").name if args.raw == RAW else args.raw
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(dataclasses.asdict(run), default=str) + "\n", encoding="utf-8")
    print(text)
    print(f"\nwritten to {out}" + (f" (raw samples: {raw})" if raw else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
