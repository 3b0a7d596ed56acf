"""Search quality over a real-world-shaped corpus, through the real catalog.

``corpus/`` holds 18 skills written for this test in the shape of a public skills repository;
``queries.tsv`` holds natural-language queries written the way people ask, each labelled
with the one skill that should answer it. The floors are the issue's: hit@1 >= 85 %,
hit@3 >= 95 %.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.search import index_catalog

HERE = Path(__file__).parent


def _queries() -> list[tuple[str, str]]:
    rows = []
    for line in (HERE / "queries.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            query, expected = line.split("\t")
            rows.append((query, expected))
    return rows


@pytest.fixture(scope="module")
def index():  # type: ignore[no-untyped-def]
    catalog = build_catalog(load_settings([str(HERE / "corpus")], {}))
    assert not [p for p in catalog.problems if p.level == "error"]
    return index_catalog(catalog)


def test_labelled_set_is_big_enough_and_labels_exist(index) -> None:  # type: ignore[no-untyped-def]
    rows = _queries()
    assert len(rows) >= 30 and len(index) >= 15
    assert {expected for _, expected in rows} <= set(index.names)


def test_quality_floors_hit_at_1_hit_at_3_and_mrr(index) -> None:  # type: ignore[no-untyped-def]
    rows = _queries()
    ranks = []
    for query, expected in rows:
        names = [h.name for h in index.search(query, 10)]
        ranks.append(names.index(expected) + 1 if expected in names else 0)
    n = len(ranks)
    hit1 = sum(r == 1 for r in ranks) / n
    hit3 = sum(1 <= r <= 3 for r in ranks) / n
    mrr = sum(1 / r for r in ranks if r) / n
    print(f"search quality: n={n} hit@1={hit1:.3f} hit@3={hit3:.3f} MRR={mrr:.3f}")
    misses = [(q, e, r) for (q, e), r in zip(rows, ranks, strict=True) if r != 1]
    assert hit1 >= 0.85, misses
    assert hit3 >= 0.95, misses
    assert mrr >= 0.9, misses
