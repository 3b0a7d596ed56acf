"""libyaml and the pure loader give one answer under the YAML 1.2 core rules.

``catalog.yaml12`` parses with libyaml's scanner when PyYAML has it (several times faster) and
keeps the pure-Python loader for every refusal. These tests hold the two to one answer: every
vector passes with libyaml off here (and on, in ``test_vectors.py``), and a differential property compares the two on
generated YAML-like text (the same value, or the same refusal with the same position).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skill_mcp.catalog import yaml12
from tests.catalog.vector_table import EXPECTED, VECTORS, check_vector

pytestmark = pytest.mark.skipif(yaml12._C_LOADERS is None, reason="PyYAML was built without libyaml")


def _outcome(text: str, *, c: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    with monkeypatch.context() as m:
        if not c:
            m.setattr(yaml12, "_C_LOADERS", None)
        try:
            value = yaml12.load(text)
        except yaml12.YamlError as exc:
            return "refused", (exc.message, exc.line, exc.column)
    return "value", _comparable(value)


def _comparable(value: Any) -> Any:
    """NaN is not equal to itself; everything else compares as parsed (types included)."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_vector_passes_under_the_pure_loader(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Under libyaml (the loader the server takes when PyYAML has it) test_vectors.py runs each one.
    monkeypatch.setattr(yaml12, "_C_LOADERS", None)
    check_vector(name, tmp_path)


def test_the_libyaml_path_is_really_taken() -> None:  # positive control for the property below
    calls: list[Any] = []
    original = yaml12._load_fast

    def spy(loader: Any, text: str) -> Any:
        calls.append(loader)
        return original(loader, text)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(yaml12, "_load_fast", spy)
        assert yaml12.load("name: x\ndescription: y\nn: [1, 0o17, .inf, ~, true]\n") == {
            "name": "x",
            "description": "y",
            "n": [1, 15, math.inf, None, True],
        }
    assert calls and calls[0] is yaml12._C_LOADERS[1]


def _vector_texts() -> list[str]:
    out = []
    for path in sorted(VECTORS.glob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
        parts = text.split("\n---\n", 1)
        out.append(parts[0].removeprefix("\ufeff").removeprefix("---\n"))
    return out


TOKENS = [
    "name",
    "description",
    "metadata",
    "tags",
    "x",
    "-",
    "- ",
    ": ",
    ":",
    " ",
    "  ",
    "\n",
    "\n  ",
    "\n    ",
    "#",
    " # c",
    "'",
    '"',
    "''",
    "[",
    "]",
    "{",
    "}",
    ", ",
    "&a ",
    "*a",
    "!!str ",
    "!!binary ",
    "!x ",
    "|",
    ">",
    "|-",
    ">+",
    "? ",
    "yes",
    "no",
    "on",
    "true",
    "False",
    "NULL",
    "~",
    "0o17",
    "017",
    "0x1F",
    "1:30",
    "2024-01-01",
    ".inf",
    "-.Inf",
    ".nan",
    "1e3",
    "1.5",
    "+12",
    "\t",
    "\r",
    "...",
    "---",
    "%YAML 1.2",
    "é",
    "\\n",
    "\\",
    "@",
    "`",
    "=",
    "<<: ",
]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(st.sampled_from(TOKENS), max_size=30).map("".join), st.sampled_from(_vector_texts())))
def test_libyaml_and_the_pure_loader_agree(text: str) -> None:
    with pytest.MonkeyPatch.context() as m:
        assert _outcome(text, c=True, monkeypatch=m) == _outcome(text, c=False, monkeypatch=m)
