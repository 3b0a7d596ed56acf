"""Hypothesis properties of the pure parsers and the path check."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.catalog.declaration import DeclarationError, build_declaration
from skill_mcp.catalog.frontmatter import FrontmatterError, parse_frontmatter, split
from skill_mcp.errors import SkillMcpError
from skill_mcp.paths import is_inside, relpath_problem, resolve_inside

BASE = Path(__file__).parent.resolve()


@given(
    st.text(max_size=80) | st.sampled_from(["..", "./a", "a/../..", "a//b", "%2e%2e", "\u2024\u2024/x", "\uff0e\uff0e"])
)
def test_any_string_is_refused_or_resolves_inside(rel: str) -> None:
    try:
        real, _ = resolve_inside(BASE, rel)
    except SkillMcpError as exc:
        assert exc.reason.value in {"invalid-path", "not-found", "not-a-file", "outside-skill"}
        return
    assert is_inside(BASE, real)
    assert relpath_problem(rel) is None


@given(st.binary(max_size=400) | st.text(max_size=400).map(lambda t: ("---\n" + t + "\n---\n").encode()))
def test_any_bytes_parse_or_raise_the_one_documented_error(raw: bytes) -> None:
    try:
        parse_frontmatter(split(raw))
    except FrontmatterError:
        pass


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=12,
    )
)
def test_any_declaration_value_builds_or_raises_declaration_error(value: object) -> None:
    try:
        build_declaration(value)
    except DeclarationError:
        pass


def test_lookalike_dots_and_slashes_are_refused() -> None:
    for rel in ("\uff0e\uff0e/x", "a\u2215b", "\ufe52\ufe52", "x/\uff0f"):
        assert relpath_problem(rel) is not None, rel
    assert relpath_problem("caf\u00e9.md") is None  # positive control: ordinary non-ASCII names are fine
    assert os.sep == "/"
