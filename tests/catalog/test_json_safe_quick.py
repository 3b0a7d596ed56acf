"""``check_json_safe`` takes a one-loop look first; it refuses exactly what the recursive check
refuses, with the same message (property over generated frontmatter-like values)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skill_mcp.catalog import frontmatter
from skill_mcp.catalog.frontmatter import FrontmatterInvalid, check_json_safe

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.sampled_from([math.inf, -math.inf, math.nan, 1.5]),
)
KEYS = st.one_of(st.text(max_size=4), st.integers(0, 3), st.booleans(), st.none(), st.floats(0, 1))
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=20
)


def _outcome(check: Any, value: Any) -> Any:
    try:
        check(value, "frontmatter")
    except FrontmatterInvalid as exc:
        return str(exc)
    return None


@settings(max_examples=300)
@given(VALUES)
def test_the_quick_look_refuses_what_the_recursive_check_refuses(value: Any) -> None:
    assert _outcome(check_json_safe, value) == _outcome(frontmatter._check_json_safe, value)


def test_a_planted_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:  # negative control
    monkeypatch.setattr(frontmatter, "_plainly_json_safe", lambda value: True)
    assert _outcome(check_json_safe, {"a": [math.inf]}) != _outcome(frontmatter._check_json_safe, {"a": [math.inf]})
