"""The common frontmatter shape read line by line (``yaml_simple``) against libyaml's reading.

Whenever ``yaml_simple.read`` accepts a text, the value must be the one libyaml's composed
path gives it (same keys in the same order, same values and types) and its plain scalars those
that path met; generated texts keep to the shape and stray from it (sequences, quotes with
escapes, indicators, comments, ``: `` inside values, tabs, U+2028, bad nesting, duplicates).
A planted bug shows the comparison can fail.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skill_mcp.catalog import yaml12, yaml_simple

pytestmark = pytest.mark.skipif(yaml12._C_LOADERS is None, reason="PyYAML was built without libyaml")

KEYS = ["name", "description", "metadata", "on", "yes", "true", "null", "k-1", "K_2", "a", "1x", "x y", "é"]
VALUES = [
    "",
    "x",
    "MIT",
    "yes",
    "no",
    "on",
    "true",
    "False",
    "~",
    "null",
    "12",
    "-3",
    "0o17",
    "0x1F",
    "017",
    "1.5",
    ".5",
    "1e3",
    ".inf",
    ".nan",
    "1:30",
    "a: b",
    "a:b",
    "a :",
    "C#",
    "x #c",
    "Hi!",
    "!x",
    "&a",
    "*a",
    "[a, b]",
    "{a: 1}",
    "- a",
    "-a",
    "? a",
    "|",
    ">",
    "%x",
    "@x",
    "`x",
    ",x",
    '"q"',
    '"q\\"x"',
    '"a\\nb"',
    "'s'",
    "'it''s'",
    "'a'b",
    '"a" b',
    "a  b  ",
    "a [b]",
    "x]",
    "a, b",
    "a ? b",
    "a - b",
    "a#b",
    "a%b",
    "a!b",
    "1 2",
    "0x",
    "--",
    ".",
    "..",
    "a |b",
    "a >b",
    "é ü",
    "a\u2028b",
    "a\tb",
    "a\x85b",
    "---",
    "...",
    "a ---",
    "x'y",
    'x"y',
]
INDENTS = ["", "", "", "  ", "  ", "    ", " ", "   "]


def _lines(rows: list[tuple[str, str, str]]) -> str:
    return "".join(f"{indent}{key}:{' ' + value if value else ''}\n" for indent, key, value in rows)


TEXTS = st.lists(
    st.tuples(st.sampled_from(INDENTS), st.sampled_from(KEYS), st.sampled_from(VALUES)), min_size=1, max_size=8
).map(_lines)


def _comparable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, dict):
        return [(_comparable(k), _comparable(v)) for k, v in value.items()]
    return (type(value).__name__, value)


def _libyaml(text: str) -> tuple[Any, list[str]] | None:
    try:
        node = yaml12.compose(text)
        value = yaml12._fast(node, 1, [0]) if node is not None else None
    except Exception:
        return None
    plain: list[str] = []
    stack: list[Any] = [node]
    while stack:  # the plain scalars in document order
        item = stack.pop()
        if isinstance(item.value, str):
            if not item.style:
                plain.append(item.value)
        else:
            children = (
                [part for pair in item.value for part in pair] if isinstance(item.value[0], tuple) else item.value
            )
            stack.extend(reversed(children))
    return value, plain


def _agrees(text: str) -> bool:
    """True unless the subset reads ``text`` otherwise than libyaml (or reads what it refuses)."""
    if not yaml12._c_safe(text) or "&" in text or "*" in text:
        return True  # load_composed never offers such text to the subset
    read = yaml_simple.read(text, yaml12._resolve_plain, yaml12._scalar)
    if read is None:
        return True
    reference = _libyaml(text)
    return reference is not None and (
        _comparable(read.value) == _comparable(reference[0]) and read.plain == reference[1]
    )


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=1500)
@given(TEXTS)
def test_what_the_subset_reads_libyaml_reads_alike(text: str) -> None:
    assert _agrees(text)


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("key", KEYS)
def test_every_listed_value_under_every_listed_key(key: str, value: str) -> None:
    assert _agrees(f"name: x\n{key}: {value}\nmetadata:\n  {key}: {value}\n  z: 1\nlast: y\n")


def test_the_common_shape_is_read_by_the_subset() -> None:  # positive control
    text = 'name: x\ndescription: "Use it. Really."\nlicense: MIT\nmetadata:\n  author: "b"\n  version: "1.0"\n'
    _, how = yaml12.load_composed(text)
    assert isinstance(how, yaml_simple.Read)
    assert _agrees(text)


def test_a_planted_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:  # negative control
    monkeypatch.setattr(yaml_simple, "_INDICATORS", frozenset("-?:,[]{}#&*|>'\"%@` "))  # forgets '!'
    assert not all(_agrees(f"name: x\nk: {value}\n") for value in ["!x", "!!str 1", "!!int 017"])
