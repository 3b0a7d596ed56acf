"""The fast decode of a cache entry's listing (``catalog.codec.decode_loaded``) against the decode it
replaced (``tests/catalog/reference_codec.py``, which read the listing as an object, format 3):
for every entry the cache writes, the same ``Loaded`` (every field of the record, the derived
ones included), and the same fields as the previous encoder wrote; for any entry with one value
swapped for another JSON value or dropped (a forged or damaged row under a good checksum), a
refusal exactly where the reference refuses the object holding the same fields (an array of
another length is refused), else the same ``Loaded``. A planted bug (one type check dropped)
must be caught by the same comparison.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.corpus import generate
from skill_mcp.catalog import codec
from skill_mcp.catalog.cached import CachedFiles, CachedFrontmatter
from skill_mcp.catalog.codec import LISTING, SKILL_FIELDS, encode_loaded, split_entry, stamps_of
from skill_mcp.catalog.skill import Loaded, load_skill
from tests.catalog import reference_codec

_REFUSED = (ValueError, KeyError, TypeError, IndexError)
Decode = Callable[..., Loaded]


Case = tuple[str, str, list[Any], bytes, bytes]
# Where a listing holds its skill, problems and nested skills (format 5: the directories' stamps
# are a part of the entry of their own, which neither decode reads).
SKILL, PROBLEMS, NESTED = LISTING.index("skill"), LISTING.index("problems"), LISTING.index("nested")


def _stamp_set(stamps: Any) -> set[tuple[Any, ...]]:
    return {tuple(s) for s in stamps}


def _stamps(skill_md: Any, stamps: Any) -> Any:
    """The stamps as format 3 held them, SKILL.md's among the others (neither decode reads them,
    so a forged value is kept as it is)."""
    if skill_md is None:
        return stamps
    try:
        return [["SKILL.md", *skill_md], *stamps]
    except TypeError:
        return [skill_md, stamps]


def as_object(listing: list[Any], stamps: Any = ()) -> dict[str, Any]:
    """The format-3 object holding the fields of a listing (an array of ``LISTING``'s length,
    whose skill is null or an array of ``SKILL_FIELDS``' length) and of the directories' stamps
    beside it, SKILL.md's stamp back among the others."""
    at, root, skill_md, skill, problems, nested = listing
    return {
        "at": at,
        "root": root,
        "stamps": _stamps(skill_md, stamps),
        "skill": None if skill is None else dict(zip(SKILL_FIELDS, skill, strict=True)),
        "problems": problems,
        "nested": nested,
    }


def _entries(root: Path) -> list[Case]:
    """(real, root_real, listing, frontmatter, rows) of every skill under ``root``, as the cache
    writes them; each checked against what the previous encoder wrote for the same result."""
    root_real = os.path.realpath(root)
    out = []
    for name in sorted(os.listdir(root_real)):
        real = f"{root_real}/{name}"
        loaded = load_skill(Path(real), Path(real), Path(root_real))
        listing, stamps, frontmatter, rows = split_entry(encode_loaded(loaded, real, root_real))
        before, frontmatter_before, rows_before = reference_codec.split_entry(
            reference_codec.encode_loaded(loaded, real, root_real)
        )
        now = as_object(listing, stamps_of(stamps))
        assert (frontmatter, rows) == (frontmatter_before, rows_before)
        assert _stamp_set(now.pop("stamps")) == _stamp_set(before.pop("stamps")) and now == before
        out.append((real, root_real, listing, frontmatter, rows))
    return out


def _corpus(tmp: Path) -> list[Case]:
    root = tmp / "corpus"
    generate(root, 80)
    # Entries with problems and nested skills too.
    (root / "refused").mkdir()
    (root / "refused" / "SKILL.md").write_text("---\nname: refused\ndescription: [unclosed\n---\nbody\n")
    outer = root / "outer"
    (outer / "inner").mkdir(parents=True)
    (outer / "SKILL.md").write_text("---\nname: outer\ndescription: Outer. Use when asked.\n---\nbody\n")
    (outer / "inner" / "SKILL.md").write_text("---\nname: inner\ndescription: Inner. Use when asked.\n---\nb\n")
    return _entries(root)


def _held(value: Any) -> Any:
    if isinstance(value, CachedFrontmatter):
        return ("frontmatter", value.text, value._description)
    if isinstance(value, CachedFiles):
        return ("files", value._raw, len(value), value.skill_md, value.checked)
    return (type(value), value)


def _view(loaded: Loaded) -> Any:
    skill = loaded.skill
    facts: Any = None
    if skill is not None:
        assert isinstance(skill.frontmatter, CachedFrontmatter)
        assert isinstance(skill.files, CachedFiles)
        facts = (
            skill.name,
            skill.directory,
            str(skill.directory),
            skill.found_at,
            skill.root,
            skill.frontmatter.text,
            skill.description,
            skill.files._raw,
            len(skill.files),
            skill.files.skill_md,
            skill.body_offset,
            skill.declaration,
            skill.missing_scripts,
            skill.skills_list_excluded,
            skill.pack,
            skill.phase,
            skill.tags,
            skill.path,
            skill.prefix,
            skill.uri_prefix,
        )
    # Every slot, as the constructor sets it (the fast decode sets them one by one); the lazy
    # parts by what they hold, which a comparison must not decode.
    slots = None if skill is None else tuple(_held(getattr(skill, slot)) for slot in type(skill).__slots__)
    return facts, slots, loaded.problems, loaded.nested, loaded.stamps, loaded.stampable


def _outcome(decode: Decode, real: str, root_real: str, entry: Any, frontmatter: bytes, rows: bytes) -> Any:
    try:
        return _view(
            decode(copy.deepcopy(entry), frontmatter, rows, real, Path(root_real), root_real, skill_md=(1, 2, 3, 4))
        )
    except _REFUSED:
        return "refused"


def _misshapen(listing: list[Any]) -> bool:
    """A listing no object holds the fields of: an array of another length (the fast decode
    refuses it, as it would refuse an object with another key set)."""
    skill = listing[SKILL] if len(listing) == len(LISTING) else None
    return len(listing) != len(LISTING) or (
        skill is not None and (type(skill) is not list or len(skill) != len(SKILL_FIELDS))
    )


def _agree(decode: Decode, case: Case) -> bool:
    real, root_real, listing, frontmatter, rows = case
    expected = (
        "refused"
        if _misshapen(listing)
        else _outcome(reference_codec.decode_loaded, real, root_real, as_object(listing), frontmatter, rows)
    )
    return _outcome(decode, real, root_real, listing, frontmatter, rows) == expected


def test_every_entry_the_cache_writes_decodes_as_the_reference_decodes_it(tmp_path: Path) -> None:
    cases = _corpus(tmp_path)
    assert any(case[2][SKILL] and case[2][SKILL][3] for case in cases)  # declarations covered
    assert any(case[2][PROBLEMS] for case in cases) and any(case[2][NESTED] for case in cases)  # problems, nested
    for case in cases:
        assert _outcome(codec.decode_loaded, *case) != "refused"
        assert _agree(codec.decode_loaded, case), case[0]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8,
)


def _slots(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (dict keys and list indices), the value itself excluded."""
    out: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        out.append((*at, key))
        out.extend(_slots(item, (*at, key)))
    return out


def _swapped(entry: list[Any], where: tuple[Any, ...], value: Any, drop: bool) -> list[Any]:
    out = copy.deepcopy(entry)
    holder: Any = out
    for key in where[:-1]:
        holder = holder[key]
    if drop:
        del holder[where[-1]]
    else:
        holder[where[-1]] = value
    return out


_CASES: list[Case] = []


def _cases(tmp: Path) -> list[Case]:
    if not _CASES:
        _CASES.extend(c for c in _corpus(tmp) if c[2][SKILL] is None or c[2][SKILL][3] or c[2][NESTED])
        _CASES.extend(c for c in _corpus(tmp / "again")[:5])
    return _CASES


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_forged_or_damaged_listing_is_refused_exactly_where_the_reference_refuses(
    data: st.DataObject, tmp_path_factory: Any
) -> None:
    cases = _cases(tmp_path_factory.mktemp("codec"))
    real, root_real, entry, frontmatter, rows = data.draw(st.sampled_from(cases))
    where = data.draw(st.sampled_from(_slots(entry)))
    forged = _swapped(entry, where, data.draw(_JSON), data.draw(st.booleans()))
    assert _agree(codec.decode_loaded, (real, root_real, forged, frontmatter, rows)), (where, json.dumps(forged))


def test_a_planted_bug_in_the_fast_decode_is_caught(tmp_path: Path, monkeypatch: Any) -> None:
    """Negative control: the fast decode with the type check of a list of strings dropped
    (``missing``, the scripts declared and not served) disagrees with the reference on a forged
    entry the comparison above would draw."""
    real, root_real, entry, frontmatter, rows = next(c for c in _corpus(tmp_path) if c[2][SKILL] is not None)
    forged = copy.deepcopy(entry)
    forged[SKILL][SKILL_FIELDS.index("missing")] = [1, 2]
    assert _agree(codec.decode_loaded, (real, root_real, forged, frontmatter, rows))
    monkeypatch.setattr(codec, "_strs", lambda values: tuple(values))
    assert not _agree(codec.decode_loaded, (real, root_real, forged, frontmatter, rows))


def test_skill_md_stamped_twice_with_different_values_is_never_written(tmp_path: Path) -> None:
    """The previous format wrote such an entry, which could never hold (one of the two stamps
    differs from any ``lstat``); this one does not write it. The same stamp twice is kept once."""
    real, root_real, *_ = next(c for c in _corpus(tmp_path) if c[2][SKILL] is not None)
    loaded = load_skill(Path(real), Path(real), Path(root_real))
    skill_md = next(s for s in loaded.stamps if s[0] == "SKILL.md")
    twice = replace(loaded, stamps=(*loaded.stamps, skill_md))
    assert split_entry(encode_loaded(twice, real, root_real)) == split_entry(encode_loaded(loaded, real, root_real))
    changed = replace(loaded, stamps=(*loaded.stamps, (*skill_md[:4], skill_md[4] + 1)))
    with pytest.raises(ValueError):
        encode_loaded(changed, real, root_real)
