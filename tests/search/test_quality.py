"""Search quality over a real-world-shaped corpus, through the real catalog.

``corpus/`` holds 67 skills written for this test in the shape of the public skills
collections (formats and media, process skills such as debugging, test-first, worktrees,
plan writing and plan executing, and three long reference-style skills of 19-69 KB);
``queries.tsv`` holds 157 natural-language queries written the way people ask, each labelled
with the one skill that should answer it. The floors are the issue's: hit@1 >= 0.90,
hit@3 >= 0.97. ``python -m bench.search_quality`` prints the same figures, and the same for
the public collections when they are present.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.search import index_catalog
from tests.search.quality import labelled, measure

HERE = Path(__file__).parent


def _queries() -> list[tuple[str, str]]:
    return labelled(HERE / "queries.tsv")


@pytest.fixture(scope="module")
def index():
    catalog = build_catalog(load_settings([str(HERE / "corpus")], {}))
    assert not [p for p in catalog.problems if p.level == "error"]
    return index_catalog(catalog)


def test_labelled_set_is_big_enough_and_labels_exist(index) -> None:
    rows = _queries()
    assert len(rows) >= 150 and len(index) >= 60
    assert {expected for _, expected in rows} <= set(index.names)


def test_quality_floors_hit_at_1_hit_at_3_and_mrr(index) -> None:
    q = measure(index, _queries())
    print(f"search quality: {q.line()}")
    assert q.hit1 >= 0.90, q.misses
    assert q.hit3 >= 0.97, q.misses
    assert q.mrr >= 0.93, q.misses
