"""``python -m bench.runs``: skill_run against a fair direct spawn, and nothing else.

    python -m bench.runs                         # N = 100, 1,000, 10,000; 30 runs per interpreter
    python -m bench.runs --sizes 100 --runs 40
    python -m bench.runs --src before=/tmp/old/src --src after=src --rounds 2   # A/B, alternating

The real server through the SDK's stdio client (``MCP_CONFIRM_ELICITATION=off``, the token round
trip), the same path ``python -m bench`` measures, without its other figures (which take long).
Per interpreter: ``--runs`` direct spawns interleaved with ``--runs`` timed confirmations, then
``--back-to-back`` confirmations with nothing in between, then ``--paced`` ones each 50 ms after
the previous result (a client that thinks between calls). Medians and p95 go to stdout as
Markdown; the raw samples (seconds) as JSON with ``--json``. ``--src LABEL=DIR`` serves from
another source tree (``PYTHONPATH``), so two versions can be measured in turns on this shared
machine, where a figure taken an hour earlier is not comparable.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from mcp.client.stdio import get_default_environment

from bench import corpus as corpora
from bench.measure import RunSamples, paired_runs, structured
from bench.servers import ServerSpec, ours_spec, session
from bench.stats import Summary, ms

ENV = {"MCP_CONFIRM_ELICITATION": "off"}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.runs", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--sizes", default="100,1000,10000", help="corpus sizes, comma-separated")
    p.add_argument("--runs", type=int, default=30, help="interleaved pairs per interpreter (default 30)")
    p.add_argument("--back-to-back", type=int, default=30, help="runs with nothing between them (default 30)")
    p.add_argument("--paced", type=int, default=30, help="runs 50 ms after the previous result (default 30)")
    p.add_argument("--cache", type=Path, default=Path("/tmp/skill-mcp-bench"), help="where corpora are kept")
    p.add_argument("--json", type=Path, default=None, help="write the raw samples here")
    p.add_argument(
        "--src",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="serve from this source tree (repeatable: measured in turns); default: as installed",
    )
    p.add_argument("--rounds", type=int, default=1, help="turns per source tree and size (samples add up)")
    return p.parse_args(argv)


def _spec(n: int, root: Path, src: str | None) -> ServerSpec:
    spec = ours_spec(str(n), root)
    return spec if src is None else ServerSpec(spec.label, spec.command, {"PYTHONPATH": str(Path(src).resolve())})


async def measure(
    n: int, cache: Path, src: str | None, runs: int, back_to_back: int, paced: int
) -> dict[str, RunSamples]:
    info = corpora.generate(cache / f"corpus-{n}", n)
    spec = _spec(n, info.root, src)
    server_env = get_default_environment() | dict(spec.params(ENV).env or {})
    out: dict[str, RunSamples] = {}
    async with session(spec, ENV) as s:
        resolved = structured(await s.client.call_tool("skill_list", {"limit": 1})).get("interpreters") or {}
        for interp, where in sorted(info.scripts.items()):
            if interp not in resolved:
                print(f"{n}: {interp} is not installed; skipped", file=sys.stderr)
                continue
            name, script = where.split(":", 1)
            args = {"skill": name, "script": script, "args": []}
            out[interp] = await paired_runs(s.client, args, server_env, runs, back_to_back, paced)
            print(f"{n}: {interp} done", file=sys.stderr)
    return out


def table(results: dict[tuple[str, int], dict[str, RunSamples]]) -> str:
    lines = [
        "| tree | N | interpreter | direct median (ms) | skill_run median (ms) | skill_run p95 (ms) | overhead (ms) "
        "| back-to-back median (ms) | back-to-back overhead (ms) | paced overhead (ms) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (label, n), by_interp in results.items():
        for interp, samples in by_interp.items():
            d, o, b, q = (Summary.of(x) for x in (samples.direct, samples.ours, samples.back_to_back, samples.paced))
            lines.append(
                f"| {label} | {n} | {interp} | {ms(d.median)} | {ms(o.median)} | {ms(o.p95)} | {ms(o.median - d.median)} "
                f"| {ms(b.median)} | {ms(b.median - d.median)} | {ms(q.median - d.median)} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    trees = [tuple(t.split("=", 1)) for t in args.src] or [("installed", None)]
    results: dict[tuple[str, int], dict[str, RunSamples]] = {}
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):
        for _ in range(args.rounds):
            for label, src in trees:
                got = anyio.run(measure, n, args.cache, src, args.runs, args.back_to_back, args.paced)
                for interp, samples in got.items():
                    into = results.setdefault((label, n), {}).setdefault(interp, RunSamples())
                    for name in ("direct", "ours", "back_to_back", "paced"):
                        getattr(into, name).extend(getattr(samples, name))
    print(table(results))
    if args.json is not None:
        raw = {f"{label}:{n}": {i: dataclasses.asdict(s) for i, s in r.items()} for (label, n), r in results.items()}
        args.json.write_text(json.dumps(raw) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
