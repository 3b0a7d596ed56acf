"""The search-quality measure both labelled query sets use (tests/search and tests/pack)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Quality:
    n: int
    hit1: float
    hit3: float
    mrr: float
    misses: list[tuple[str, str, int]]  # (query, expected, rank or 0) for every query not ranked first

    def line(self) -> str:
        return f"n={self.n} hit@1={self.hit1:.3f} hit@3={self.hit3:.3f} MRR={self.mrr:.3f}"


def labelled(path: Path) -> list[tuple[str, str]]:
    """The (query, expected skill) rows of a labelled set: tab-separated, ``#`` comments and blank lines skipped."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            query, expected = line.split("\t")
            rows.append((query, expected))
    return rows


def measure(index: Any, rows: Sequence[tuple[str, str]], depth: int = 10) -> Quality:
    """Rank of the expected skill for each (query, expected) row, and the three figures."""
    ranks = []
    for query, expected in rows:
        names = [hit.name for hit in index.search(query, depth)]
        ranks.append(names.index(expected) + 1 if expected in names else 0)
    n = len(ranks)
    return Quality(
        n=n,
        hit1=sum(r == 1 for r in ranks) / n,
        hit3=sum(1 <= r <= 3 for r in ranks) / n,
        mrr=sum(1 / r for r in ranks if r) / n,
        misses=[(q, e, r) for (q, e), r in zip(rows, ranks, strict=True) if r != 1],
    )
