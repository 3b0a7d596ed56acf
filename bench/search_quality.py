"""``python -m bench.search_quality``: search quality, latency and index build time.

Quality: hit@1, hit@3 and MRR of the labelled set in ``tests/search`` (67 skills, 157
queries), of the first phase's partial index too (``-partial``: names, descriptions and tags
only, what a first search answers from before the bodies are in), and, when the public collections are unpacked (``--public``, default
``$SKILL_MCP_PUBLIC_SKILLS``, as ``anthropics+skills``, ``obra+superpowers`` and ``openai+skills``), of ``search_queries.PUBLIC_QUERIES`` over them. Speed: on the benchmark
corpus (``bench/corpus.py``), the index's first build (CPU seconds) and the server-side time
of ``search_result`` (the whole ``skill_search`` answer) per query, median and p95. Run it with
another checkout's ``src`` first on ``PYTHONPATH`` to measure a "before".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import corpus as corpora
from bench.search_queries import PUBLIC_QUERIES
from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.search import index_catalog, search_result, short_index

HERE = Path(__file__).resolve().parent
OWN = HERE.parent / "tests" / "search"
PUBLIC_ROOTS = (
    "anthropics+skills/skills",
    "obra+superpowers/skills",
    "openai+skills/skills/.system",
    "openai+skills/skills/.curated",
    "openai+skills/skills/.experimental",
)


def _rows(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            query, expected = line.split("\t")
            out.append((query, expected))
    return out


def quality(roots: list[str], rows: list[tuple[str, str]], *, partial: bool = False) -> dict[str, Any]:
    """``partial``: of the first phase's index (names, descriptions, tags: no body, no heading)."""
    catalog = build_catalog(load_settings(roots, {}))
    index = short_index(catalog) if partial else index_catalog(catalog)
    ranks = []
    for query, expected in rows:
        names = [hit.name for hit in index.search(query, 10)]
        ranks.append(names.index(expected) + 1 if expected in names else 0)
    n = len(ranks)
    return {
        "skills": len(index),
        "queries": n,
        "hit@1": sum(r == 1 for r in ranks) / n,
        "hit@3": sum(1 <= r <= 3 for r in ranks) / n,
        "mrr": sum(1 / r for r in ranks if r) / n,
    }


def speed(root: Path, queries: tuple[str, ...], repeat: int) -> dict[str, Any]:
    catalog = build_catalog(load_settings([str(root)], {}))
    start = time.process_time()
    index = index_catalog(catalog)
    build_s = time.process_time() - start
    wall, cpu = [], []
    for _ in range(repeat):
        for query in queries:
            t0, c0 = time.perf_counter(), time.thread_time()
            search_result(catalog, index, query, 10)
            cpu.append((time.thread_time() - c0) * 1000)
            wall.append((time.perf_counter() - t0) * 1000)
    # Wall time includes the moments this process waited for a core (a shared machine);
    # the thread's CPU time is what the query itself cost.
    wall.sort()
    cpu.sort()
    p95 = int(0.95 * (len(wall) - 1))
    return {
        "skills": len(index),
        "build_cpu_s": build_s,
        "query_ms_median": statistics.median(wall),
        "query_ms_p95": wall[p95],
        "query_cpu_ms_median": statistics.median(cpu),
        "query_cpu_ms_p95": cpu[p95],
        "queries": len(wall),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.search_quality", description=__doc__)
    p.add_argument(
        "--public",
        type=Path,
        default=Path(os.environ.get("SKILL_MCP_PUBLIC_SKILLS", "build/public-skills")),
        help="where the public collections are",
    )
    p.add_argument("--sizes", default="1000,10000", help="benchmark corpus sizes for speed ('' for none)")
    p.add_argument("--cache", type=Path, default=Path("/tmp/skill-mcp-bench"), help="where corpora are kept")
    p.add_argument("--repeat", type=int, default=30, help="times each corpus query is run")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    own_rows = _rows((OWN / "queries.tsv").read_text("utf-8"))
    out: dict[str, Any] = {
        "own": quality([str(OWN / "corpus")], own_rows),
        "own-partial": quality([str(OWN / "corpus")], own_rows, partial=True),
    }
    roots = [args.public / r for r in PUBLIC_ROOTS]
    if all(r.is_dir() for r in roots):
        out["public"] = quality([str(r) for r in roots], _rows(PUBLIC_QUERIES))
        out["public-partial"] = quality([str(r) for r in roots], _rows(PUBLIC_QUERIES), partial=True)
    for label in ("own", "own-partial", "public", "public-partial"):
        if label in out:
            q = out[label]
            print(
                f"{label:14s} {q['skills']:3d} skills {q['queries']:3d} queries  hit@1 {q['hit@1']:.3f}  "
                f"hit@3 {q['hit@3']:.3f}  MRR {q['mrr']:.3f}"
            )
    for n in (int(s) for s in args.sizes.split(",") if s):
        info = corpora.generate(args.cache / f"corpus-{n}", n)
        s = out[f"speed-{n}"] = speed(info.root, info.queries, args.repeat)
        print(
            f"{n:>6} skills  build {s['build_cpu_s']:.2f} CPU s  query wall median {s['query_ms_median']:.3f} ms "
            f"p95 {s['query_ms_p95']:.3f} ms, CPU median {s['query_cpu_ms_median']:.3f} ms "
            f"p95 {s['query_cpu_ms_p95']:.3f} ms  ({s['queries']} queries)"
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
