"""The persisted index's key (``store.catalog_key``) is exactly as discriminating as the
``repr`` of every record it replaced: two catalogs get the same key exactly when every field
and stamp of every skill is the same; a skill fed one at a time (a build) and a catalog keyed at
once (a warm start) get the same key; and a key written by earlier code is a clean miss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.search import build_index, index_catalog
from skill_mcp.search.index import SearchDoc
from skill_mcp.search.source import _key_fields, current_key, in_order, stored_index
from skill_mcp.search.store import KeyHasher, catalog_key, index_file, key_columns, load, save

CORPUS = Path(__file__).parent / "corpus"

# Few characters, so that naive encodings collide: a NUL, a comma, a surrogate, and the letters
# the encoding marks its columns with.
_TEXT = st.text(alphabet=["a", "b", "\0", ",", "\ud800", "é", " ", "s", "l", "q", "t"], max_size=4)
_INT = st.sampled_from([0, 1, -1, 7, 2**63 - 1, 2**63, -(2**63), 2**64 + 5, 10**30])
_STAMP = st.none() | st.tuples(_INT, _INT, _INT, _INT)
_RECORD = st.tuples(
    _TEXT,
    _TEXT,
    st.binary(max_size=4).map(bytes),
    st.lists(_TEXT, max_size=3).map(tuple),
    st.none() | _TEXT,
    _INT,
)


def _key(records: list[tuple[Any, ...]], stamps: list[Any]) -> str:
    return catalog_key(key_columns(records), stamps)


@st.composite
def _pair(draw: st.DrawFn) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """A catalog, and the same catalog with one value of one skill replaced by another drawn
    value (sometimes the same), one field or stamp of two skills swapped, or a skill removed."""
    records = draw(st.lists(_RECORD, min_size=1, max_size=4))
    stamps = draw(st.lists(_STAMP, min_size=len(records), max_size=len(records)))
    other, other_stamps = list(records), list(stamps)
    i = draw(st.integers(0, len(records) - 1))
    j = draw(st.integers(0, len(records) - 1))
    what = draw(st.integers(0, 9))
    if what == 8:  # one field's values of two skills swapped (or the same skill: no change)
        f = draw(st.integers(0, 5))
        a, b = list(other[i]), list(other[j])
        a[f], b[f] = other[j][f], other[i][f]
        other[i] = tuple(a)
        other[j] = tuple(b) if i != j else tuple(a)
    elif what == 9:
        other_stamps[i], other_stamps[j] = stamps[j], stamps[i]
    elif what < 6:
        changed = list(other[i])
        changed[what] = draw(
            [_TEXT, _TEXT, st.binary(max_size=4), _RECORD.map(lambda r: r[3]), st.none() | _TEXT, _INT][what]
        )
        other[i] = tuple(changed)
    elif what == 6:
        other_stamps[i] = draw(_STAMP)
    else:
        del other[i], other_stamps[i]
    return records, stamps, other, other_stamps


@settings(max_examples=500)
@given(_pair())
def test_two_catalogs_share_a_key_exactly_when_their_records_are_the_same(pair: tuple[list[Any], ...]) -> None:
    records, stamps, other, other_stamps = pair
    same = repr((records, stamps)) == repr((other, other_stamps))
    assert (_key(records, stamps) == _key(other, other_stamps)) == same


def test_strings_that_naive_joins_would_confuse_get_different_keys() -> None:
    base = ("n", "d", b"{}", ("a", "b"), None, 5)
    variants = [
        base,
        ("n", "d", b"{}", ("a b",), None, 5),
        ("n", "d", b"{}", ("ab",), None, 5),
        ("n", "d", b"{}", ("a", "b", ""), None, 5),
        ("n", "d", b"{}", ("a", "b"), "", 5),
        ("n\0d", "", b"{}", ("a", "b"), None, 5),
        ("n", "d", b"{}\0", ("a", "b"), None, 5),
        ("n", "d", b"{}", ("a\0", "b"), None, 5),
    ]
    keys = {_key([v], [(1, 2, 3, 4)]) for v in variants}
    assert len(keys) == len(variants)
    assert _key([base], [None]) != _key([base], [(0, 0, 0, 0)])
    assert _key([base, base], [None, None]) != _key([base], [None])
    # values moved from one skill to the next
    empty = ("n", "d", b"{}", (), None, 5)
    assert _key([base, empty], [None, None]) != _key([empty, base], [None, None])
    assert _key([base, base], [None, (1, 2, 3, 4)]) != _key([base, base], [(1, 2, 3, 4), None])
    assert _key([("ab", "", b"", (), None, 0), ("c", "", b"", (), None, 0)], [None, None]) != _key(
        [("a", "", b"", (), None, 0), ("bc", "", b"", (), None, 0)], [None, None]
    )
    # text moved from one field to the next, across the column marker
    assert _key([("as", "b", b"", (), None, 0)], [None]) != _key([("a", "sb", b"", (), None, 0)], [None])
    named = ("", "d", b"{}", (), "p", 5)
    assert _key([named, empty], [None, None]) != _key([empty, named], [None, None])


def test_values_of_other_types_are_keyed_by_repr_and_still_told_apart() -> None:
    odd = ("n", "d", b"{}", ["a", "b"], None, 5)  # tags as a list
    key = _key([odd], [None])
    assert key == _key([odd], [None])
    assert key != _key([("n", "d", b"{}", ["a", "c"], None, 5)], [None])
    assert key != _key([("n", "d", b"{}", ("a", "b"), None, 5)], [None])


def test_a_build_fed_skill_by_skill_and_a_catalog_keyed_at_once_agree() -> None:
    catalog = build_catalog(load_settings([str(CORPUS)], {"SKILL_MCP_CACHE": "off"}))
    skills = in_order(catalog)
    hasher = KeyHasher()
    for skill in skills:
        hasher.add(_key_fields(skill), None)
    stamps = [None] * len(skills)
    assert hasher.count == len(skills)
    assert hasher.hexdigest() == catalog_key(key_columns([_key_fields(s) for s in skills]), stamps)
    assert current_key(skills) == current_key(skills, [_key_fields(s) for s in skills])
    assert current_key(skills).startswith(f"k2:{len(skills)}:")


def test_an_index_keyed_the_earlier_way_is_a_clean_miss(tmp_path: Path) -> None:
    catalog = build_catalog(load_settings([str(CORPUS)], {"SKILL_MCP_CACHE": "off"}))
    cache = tmp_path / "cache"
    index_catalog(catalog, cache, now_ns=lambda _d: 2**62)  # written with this code's key
    assert stored_index(catalog, cache) is not None  # the positive control: read back
    path = index_file(cache, catalog.roots)
    old_key = f"{len(catalog.skills)}:{'0' * 64}"  # the shape earlier code wrote
    save(path, old_key, build_index([SearchDoc("x")]))
    assert load(path, old_key) is not None
    assert stored_index(catalog, cache) is None  # a miss, not an error
    assert load(path, current_key(in_order(catalog))) is None
