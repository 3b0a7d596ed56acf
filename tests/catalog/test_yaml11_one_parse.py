"""The one-parse YAML 1.1 check (``differences_composed``) against the two-parse reference.

``differences`` parses the frontmatter a second time with PyYAML's safe loader; the catalog
reads the YAML 1.1 values off the node tree the YAML 1.2 parse already composed. These tests
hold the two to the same verdicts (fields, both readings and their types, key flags) on
generated text, the refusal vectors and the known ambiguous values, show the one-parse path is
really taken, and plant a bug to show the comparison can fail.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skill_mcp.catalog import yaml11, yaml12
from skill_mcp.catalog.declaration import read_declaration
from skill_mcp.catalog.frontmatter import FrontmatterError, parse_frontmatter_composed, split
from tests.catalog.test_yaml_loaders import TOKENS, _vector_texts

pytestmark = pytest.mark.skipif(yaml12._C_LOADERS is None, reason="PyYAML was built without libyaml")

SCALARS = [
    "x",
    "MIT",
    "name",
    "yes",
    "Yes",
    "YES",
    "no",
    "No",
    "on",
    "ON",
    "Off",
    "y",
    "n",
    "true",
    "False",
    "NULL",
    "null",
    "~",
    "",
    "0o17",
    "017",
    "0x1F",
    "0b101",
    "1_000",
    "1:30",
    "-1:30:00",
    "2024-01-02",
    "2024-01-02 10:00:00",
    "2024-13-45",
    "1e3",
    "1.5e+3",
    "1.5",
    ".5",
    "1.",
    "+12",
    "-0",
    ".inf",
    "-.Inf",
    ".NaN",
    "=",
    "<<",
    "R&D",
    "*x",
    "Hi!",
    "tool!",
    "!important",
    "a !!str b",
    '"yes"',
    "'on'",
    "[a, yes]",
    "[1, 017, ~]",
    "|\n  yes\n",
    ">-\n  on\n  off\n",
    "tab\there",
    "a: b",
    "x # c",
    "0x_1",
    "190:20:30",
    "6.8523015e+5",
    "685_230.15",
    "+685_230",
    "0.",
    "-.5",
]
KEYS = ["name", "description", "license", "on", "yes", "'on'", "true", "1", "017", "<<", "=", "~", "n", "2024-01-02"]


def _lines(pairs: list[tuple[str, str, str]]) -> str:
    out = []
    for key, value, nested in pairs:
        out.append(f"{key}: {value}\n" if not nested else f"{key}:\n  {nested}: {value}\n")
    return "".join(out)


FRONTMATTERS = st.one_of(
    st.lists(
        st.tuples(st.sampled_from(KEYS), st.sampled_from(SCALARS), st.sampled_from(["", "", "k", "on", "y"])),
        max_size=6,
    ).map(_lines),
    st.lists(st.sampled_from(TOKENS + SCALARS), max_size=30).map("".join),
    st.sampled_from(_vector_texts()),
)


def _comparable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, dict):
        return [(_comparable(k), _comparable(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return (type(value).__name__, value)


def _verdicts(diffs: list[yaml11.Difference]) -> list[Any]:
    return [(d.field, d.key, _comparable(d.yaml12), _comparable(d.yaml11)) for d in diffs]


def _agree(text: str) -> bool:
    """True when both functions give one verdict for ``text`` (or the 1.2 reading refuses it)."""
    try:
        published, node = yaml12.load_composed(text)
    except yaml12.YamlError:
        return True
    if not isinstance(published, dict):
        return True
    reference = _verdicts(yaml11.differences(text, published))
    # With the tree of the 1.2 parse, and without it (libyaml composes the text once more).
    return _verdicts(yaml11.differences_composed(text, published, node)) == reference and reference == _verdicts(
        yaml11.differences_composed(text, published, None)
    )


def _agree_as_a_skill(text: str) -> bool:
    """``_agree`` for the published frontmatter as a skill builds it: the mcp-host block parsed
    on its own and appended (so the entry's order can differ from the text's)."""
    parts = split(f"---\n{text}---\n".encode())
    try:
        frontmatter, host, composed = parse_frontmatter_composed(parts)
    except FrontmatterError:
        return True
    declared = read_declaration(host, parts.first_line)
    if host.present and declared.parsed:
        frontmatter = {**frontmatter, "mcp-host": declared.raw}
    tree = None if host.present else composed
    return _verdicts(yaml11.differences_composed(parts.frontmatter, frontmatter, tree)) == _verdicts(
        yaml11.differences(parts.frontmatter, frontmatter)
    )


HOST_BLOCKS = [
    "mcp-host:\n  version: 1\n",
    "mcp-host:\n  version: 1\n  run:\n    - script: scripts/x.sh\n      interpreter: bash\n      timeout: 017\n",
    "mcp-host:\n  version: yes\n  egress: [on, example.com]\n",
    "mcp-host: {version: 1}\n",
    "mcp-host:\n  version: 1\n  env:\n    - name: X\n      secret: off\n",
    "mcp-host:\n  - broken\n  version: 1\n",
]


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(
    st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(SCALARS), st.sampled_from(["", "k"])), max_size=4),
    st.sampled_from(HOST_BLOCKS),
    st.integers(0, 4),
)
def test_skills_with_an_mcp_host_block_anywhere_get_the_same_verdicts(
    pairs: list[tuple[str, str, str]], block: str, at: int
) -> None:
    lines = _lines([("name", "x", ""), ("description", "d", ""), *pairs]).splitlines(keepends=True)
    at = min(at, len(lines))
    assert _agree_as_a_skill("".join(lines[:at]) + block + "".join(lines[at:]))


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=400)
@given(FRONTMATTERS)
def test_one_parse_and_two_parses_give_the_same_verdicts(text: str) -> None:
    assert _agree(text)


@pytest.mark.parametrize("value", SCALARS)
@pytest.mark.parametrize("key", KEYS)
def test_every_listed_scalar_as_a_value_and_beside_a_key(key: str, value: str) -> None:
    assert _agree(f"name: x\ndescription: d\n{key}: {value}\nmetadata:\n  {value}: {key}\n")


def test_the_one_parse_path_is_really_taken(monkeypatch: pytest.MonkeyPatch) -> None:  # positive control
    def refuse(text: str, published: Any) -> Any:
        raise AssertionError("the reference ran")

    monkeypatch.setattr(yaml11, "differences", refuse)
    for text in ("name: x\ndescription: d\nlicense: MIT\n", "name: x\ndescription: d\nlicense: yes\nn: 017\n"):
        published, node = yaml12.load_composed(text)
        assert node is not None
        yaml11.differences_composed(text, published, node)  # no AssertionError: no second parse
        yaml11.differences_composed(text, published, None)  # composed once more, not parsed


def test_a_planted_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:  # negative control
    monkeypatch.setattr(yaml11, "_reads_alike", lambda value: True)
    monkeypatch.setattr(yaml11, "_alike_memo", {})
    assert not all(_agree(f"name: x\ndescription: d\nlicense: {value}\n") for value in SCALARS)


def test_the_node_is_handed_on_only_when_it_was_composed_from_the_whole_frontmatter() -> None:
    plain = split(b"---\nname: x\ndescription: d\n---\nbody\n")
    assert parse_frontmatter_composed(plain)[2] is not None
    hosted = split(b"---\nname: x\ndescription: d\nmcp-host:\n  version: 1\n---\nbody\n")
    assert parse_frontmatter_composed(hosted)[2] is None  # the host block was parsed on its own
    flow = split(b"---\nname: x\ndescription: d\nm: {a: 1}\n---\nbody\n")
    assert parse_frontmatter_composed(flow)[2] is None  # the pure loader read it: no libyaml events
