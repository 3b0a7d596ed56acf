"""Search quality on the bundled pack: a labelled query set written the way users ask.

Floors are the search issue's: the right skill first for at least 85% of queries and in the
top three for at least 95%. The figures are printed (pytest -s) for the closing note.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.search import index_catalog
from tests.search.quality import labelled, measure

HERE = Path(__file__).parent


def _queries(name: str = "queries.tsv") -> list[tuple[str, str]]:
    return labelled(HERE / name)


@pytest.fixture(scope="module")
def index():
    return index_catalog(build_catalog(load_settings([], {})))


def test_the_query_set_is_large_and_covers_every_phase(index) -> None:
    rows = _queries()
    assert len(rows) >= 30
    assert {expected for _, expected in rows} <= set(index.names)
    assert len({expected for _, expected in rows}) >= 45  # nearly every skill is someone's answer


@pytest.mark.parametrize("name", ["queries.tsv", "queries-heldout.tsv"])
def test_hit_at_1_and_hit_at_3_on_the_bundled_pack(index, name: str) -> None:
    q = measure(index, _queries(name))
    print(f"bundled pack search ({name}): {q.line()}")
    assert q.hit1 >= 0.85, q.misses
    assert q.hit3 >= 0.95, q.misses
