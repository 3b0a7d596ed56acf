"""``frontmatter.split`` (a search for the closing line in the common shape) against the line
cut it replaced (``tests/catalog/reference_split.py``): the same Split, or the same refusal
at the same line, on generated SKILL.md text; a planted bug shows the comparison can fail."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skill_mcp.catalog import frontmatter
from skill_mcp.catalog.frontmatter import FRONTMATTER_MAX_BYTES, FrontmatterError, split
from tests.catalog.reference_split import split as reference_split

PIECES = [
    "---",
    "...",
    "----",
    "--- x",
    "\n",
    "\n",
    "\n",
    "\r\n",
    "\r",
    " ",
    "\t",
    "a: b",
    "é",
    "\x85",
    "\u2028",
    "\x0c",
    "\x0b",
    "\x1c",
    "\x1e",
    "\u2029",
    "#",
]
RAW = st.lists(st.sampled_from(PIECES), max_size=24).map(lambda parts: "".join(parts).encode("utf-8"))


def _outcome(fn: Any, raw: bytes) -> Any:
    try:
        return ("split", fn(raw))
    except FrontmatterError as exc:
        return ("refused", str(exc), exc.line, exc.column)


def _same(raw: bytes) -> bool:
    return _outcome(split, raw) == _outcome(reference_split, raw)


@settings(max_examples=500)
@given(st.one_of(RAW, RAW.map(lambda raw: b"---\n" + raw), RAW.map(lambda raw: b"\xef\xbb\xbf---\n" + raw)))
def test_the_split_equals_the_line_cut(raw: bytes) -> None:
    assert _same(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"---\nname: x\n---\nbody\n",
        b"---  \nname: x\n...\t\nbody",
        b"---\nname: x\n---",
        b"---\n---\n",
        b"---\nname: \xc3\xa9\n---\n\xc3\xa9 body\n",
        b"---\n" + b"k: v\n" * (FRONTMATTER_MAX_BYTES // 5) + b"---\nbody\n",
        b"---\n" + b"k: v\n" * (FRONTMATTER_MAX_BYTES // 5 - 2) + b"---\n" + b"b" * FRONTMATTER_MAX_BYTES,
        b"---\na: b\n" + b"b" * (FRONTMATTER_MAX_BYTES * 2) + b"\n---\n",
    ],
)
def test_the_listed_shapes_and_the_size_limit(raw: bytes) -> None:
    assert _same(raw)


def test_a_planted_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:  # negative control
    monkeypatch.setattr(frontmatter, "_OTHER_LINE_ENDS", re.compile("\r"))  # forgets U+2028
    assert not _same("---\nname: x\u2028---\n---\nbody\n".encode())
