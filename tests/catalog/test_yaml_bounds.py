"""Every YAML reader holds a document to the same bounds, and a hostile one costs bounded work.

A frontmatter (and an ``mcp-host:`` block) may hold ``YAML_VALUES_MAX`` values and nest
``YAML_DEPTH_MAX`` deep (``limits``). Denied: a text at the 64 KiB size limit written to be slow
for PyYAML's pure-Python loader (which reads the corners libyaml reads otherwise and words
every refusal) making the catalog's build read all of it: before these bounds such a text cost
0.6-0.75 s of CPU here against a tenth of a millisecond for an ordinary frontmatter, and flow
collections nested a thousand deep cost that much in 20 KiB, the scanner slowing with the
square of the depth. Each shape below is refused (``frontmatter-parse``, the detail says which
bound) after bounded scanner work, counted rather than timed. The positive controls: a document
exactly at each bound is read, by every reader alike (the line reader, libyaml, the pure loader:
the same value, or the same refusal at the same place, with libyaml on and off), and an
``mcp-host:`` block at the declaration bounds is read and declares every script.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.catalog import yaml12
from skill_mcp.catalog.skill import load_skill
from skill_mcp.grantrules import DECLARATION_BOUNDS
from skill_mcp.limits import YAML_DEPTH_MAX, YAML_VALUES_MAX
from skill_mcp.reasons import ProblemReason

pytestmark = pytest.mark.skipif(yaml12._C_LOADERS is None, reason="PyYAML was built without libyaml")

HEAD = "name: s\ndescription: d\n"  # five values: the root mapping, two keys, their two values


def _block_keys(n: int) -> str:
    """Read line by line (or by libyaml): the head, then ``metadata`` holding ``n`` keys."""
    return HEAD + "metadata:\n" + "".join(f"  k{i}: v\n" for i in range(n))


def _flow_items(n: int) -> str:
    """libyaml's path: a flow sequence of ``n`` scalars."""
    return HEAD + "l: [" + ", ".join("a" for _ in range(n)) + "]\n"


def _flow_mapping(n: int) -> str:
    """The pure loader's path (a flow mapping is a corner): ``n`` pairs."""
    return HEAD + "m: {" + ", ".join(f"k{i}: v" for i in range(n)) + "}\n"


def _flow_depth(n: int) -> str:
    return HEAD + "d: " + "[" * n + "x" + "]" * n + "\n"


def _block_depth(n: int) -> str:
    return HEAD + "".join("  " * i + "a:\n" for i in range(n)) + "  " * n + "a: x\n"


def _values(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_values(k) + _values(v) for k, v in value.items())
    if isinstance(value, list):
        return 1 + sum(_values(v) for v in value)
    return 1


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((max(_depth(k), _depth(v)) for k, v in value.items()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 1


def _largest(make: Callable[[int], str], measure: Callable[[Any], int], bound: int) -> int:
    """The largest ``n`` whose document measures at most ``bound`` (the measure grows with ``n``)."""
    low, high = 1, 2 * bound
    while low < high:
        mid = (low + high + 1) // 2
        if measure(_reference(make(mid))) <= bound:
            low = mid
        else:
            high = mid - 1
    return low


def _reference(text: str) -> Any:
    """The value PyYAML's safe loader gives ``text``, with neither bound: what the bounds are measured on."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _outcome(text: str, *, libyaml: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    with monkeypatch.context() as m:
        if not libyaml:
            m.setattr(yaml12, "_C_LOADERS", None)
        try:
            return "value", yaml12.load(text)
        except yaml12.YamlError as exc:
            return "refused", (exc.message, exc.line, exc.column)


SHAPES: dict[str, tuple[Callable[[int], str], Callable[[Any], int], int, str]] = {
    "block keys": (_block_keys, _values, YAML_VALUES_MAX, yaml12.TOO_MANY),
    "flow items": (_flow_items, _values, YAML_VALUES_MAX, yaml12.TOO_MANY),
    "flow mapping": (_flow_mapping, _values, YAML_VALUES_MAX, yaml12.TOO_MANY),
    "flow depth": (_flow_depth, _depth, YAML_DEPTH_MAX, yaml12.TOO_DEEP),
    "block depth": (_block_depth, _depth, YAML_DEPTH_MAX, yaml12.TOO_DEEP),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_document_at_the_bound_is_read_and_one_past_it_refused_by_every_reader(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make, measure, bound, message = SHAPES[shape]
    n = _largest(make, measure, bound)
    at, past = make(n), make(n + 1)
    assert measure(_reference(at)) <= bound < measure(_reference(past))
    read = _outcome(at, libyaml=True, monkeypatch=monkeypatch)
    assert read == ("value", _reference(at))
    assert read == _outcome(at, libyaml=False, monkeypatch=monkeypatch)
    refused = _outcome(past, libyaml=True, monkeypatch=monkeypatch)
    assert refused[0] == "refused" and refused[1][0] == message
    assert refused == _outcome(past, libyaml=False, monkeypatch=monkeypatch)


class _Work:
    """The pure scanner's work: each ``fetch_more_tokens`` call, weighted by the possible keys it
    walks (``stale_possible_simple_keys`` visits one per open flow level: the square of the depth)."""

    def __init__(self) -> None:
        self.units = 0


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Work]:
    counted = _Work()
    fetch = yaml12.CoreLoader.fetch_more_tokens

    def counting(self: Any) -> None:
        counted.units += 1 + len(self.possible_simple_keys)
        fetch(self)

    monkeypatch.setattr(yaml12.CoreLoader, "fetch_more_tokens", counting)
    yield counted


LIMIT = 64 * 1024


def _fill(head: str, item: str, sep: str, tail: str) -> str:
    """``head`` + as many ``item`` as fit the frontmatter's size limit + ``tail``."""
    count = (LIMIT - len(head) - len(tail) - 64) // (len(item) + len(sep))
    return head + sep.join([item] * count) + tail


HOSTILE = {
    # A flow mapping, or a '?' inside a flow sequence, sends the text to the pure loader.
    "flow maps": _fill(HEAD + "l: [", "{a: 1}", ",", "]\n"),
    "explicit keys": _fill(HEAD + "l: [", "? a", ",", "]\n"),
    "one wide flow mapping": HEAD + "m: {" + ", ".join(f"k{i}: v" for i in range(6_000)) + "}\n",
    # libyaml reads these, then hands them to the pure loader to word the refusal.
    "flow items": _fill(HEAD + "l: [", "[a]", ",", "]\n"),
    "block keys": HEAD + "metadata:\n" + "".join(f"  k{i}: v\n" for i in range(LIMIT // 12)),
    "flow nesting": HEAD + "d: " + "[" * 10_000 + "]" * 10_000 + "\n",
    "nesting in a flow mapping": HEAD + "d: " + "{a: " * 5_000 + "1" + "}" * 5_000 + "\n",
}
# With the bounds none of these costs the scanner more than this (16,380 units at most here).
# Before them: 112,201 for the flow maps, 49,093 for the explicit keys, 30,013 for the wide flow
# mapping and 857,937 for the flow nesting (0.3-0.9 s of CPU each); libyaml served the flow
# items and the block keys, 28,000 and 11,000 values.
WORK_MAX = 5 * YAML_VALUES_MAX


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_frontmatter_is_refused_after_bounded_work(name: str, work: _Work, tmp_path: Path) -> None:
    text = HOSTILE[name]
    assert len(text.encode()) <= LIMIT  # within the size limit: only the new bounds stop it
    skill = tmp_path / "s"
    skill.mkdir()
    (skill / "SKILL.md").write_text(f"---\n{text}---\n# body\n", encoding="utf-8")
    loaded = load_skill(skill, skill, tmp_path)
    assert loaded.skill is None
    [problem] = loaded.problems
    assert problem.reason is ProblemReason.FRONTMATTER_PARSE
    assert yaml12.TOO_MANY in problem.detail or yaml12.TOO_DEEP in problem.detail
    assert 0 < work.units <= WORK_MAX, work.units


def test_an_mcp_host_block_at_the_declaration_bounds_is_read(tmp_path: Path) -> None:
    """The positive control for the value bound: every script and every host the declaration
    bounds allow, each script with a timeout, a description and two variables."""
    scripts = "".join(
        f"    - script: scripts/a{i}.py\n      interpreter: python\n      timeout: 60\n"
        f"      description: Step {i}.\n      env: [V0, V1]\n"
        for i in range(DECLARATION_BOUNDS.scripts)
    )
    hosts = "".join(f"    - h{i}.example.com\n" for i in range(DECLARATION_BOUNDS.hosts))
    text = (
        "---\nname: s\ndescription: Declares every script it may.\nmcp-host:\n  version: 1\n  run:\n"
        f"{scripts}  egress:\n{hosts}---\n# body\n"
    )
    assert len(text.encode()) <= LIMIT
    skill = tmp_path / "s"
    (skill / "scripts").mkdir(parents=True)
    for i in range(DECLARATION_BOUNDS.scripts):
        (skill / "scripts" / f"a{i}.py").write_text("print(1)\n", encoding="utf-8")
    (skill / "SKILL.md").write_text(text, encoding="utf-8")
    loaded = load_skill(skill, skill, tmp_path)
    assert loaded.skill is not None and loaded.skill.declaration is not None
    assert [p.reason for p in loaded.problems] == []
    assert len(loaded.skill.declaration.run) == DECLARATION_BOUNDS.scripts
    assert len(loaded.skill.declaration.egress) == DECLARATION_BOUNDS.hosts
