"""Trees built to be deep cost the catalog bounded work, and only the skill that holds them.

Denied, each with the neighbour still served as the positive control:
- a directory tree nested deeper than the interpreter's recursion limit inside one skill ending
  the whole catalog's build (the walk recursed once per level, and ``RecursionError`` left every
  skill unserved: ``skill_list`` answered a protocol error);
- a chain of SKILL.md files, each nested in the one before, making the build walk the chain once
  for every skill in it (each walk lists every SKILL.md below it, and each of those was queued
  and walked again: 150 cost 7.7 s here, 300 cost 90 s). Nested skills are served down to
  ``NESTED_MAX_DEPTH`` levels below their top-level skill; a deeper SKILL.md is reported
  (``nested-too-deep``) and its files stay files of the skill around it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skill_mcp import trees
from skill_mcp.catalog import build_catalog, walk
from skill_mcp.catalog.discover import NESTED_MAX_DEPTH
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.reasons import Level, ProblemReason


@pytest.fixture
def root() -> Iterator[Path]:
    """A skills root removed by the depth-proof walk (pytest's own clean-up recurses)."""
    path = Path(tempfile.mkdtemp(prefix="skill-mcp-deep-"))
    try:
        yield path
    finally:
        trees.remove_tree(str(path))


def _skill(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} skill.\n---\n# {name}\n")
    return directory


def _scan(root: Path) -> Catalog:
    return build_catalog(load_settings([str(root)], {"SKILL_MCP_CACHE": "off"}))


class _Visits:
    def __init__(self) -> None:
        self.directories = 0


@pytest.fixture
def visits(monkeypatch: pytest.MonkeyPatch) -> _Visits:
    """How many directories the catalog's walks list, across every skill."""
    counted = _Visits()
    visit = walk._Walker.visit

    def counting(self: Any, *args: Any) -> Any:
        counted.directories += 1
        return visit(self, *args)

    monkeypatch.setattr(walk._Walker, "visit", counting)
    return counted


def test_a_tree_a_thousand_levels_deep_costs_its_skill_the_deep_files_and_nothing_else(root: Path) -> None:
    deep = _skill(root / "deep", "deep")
    _skill(root / "ok", "ok")
    fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    try:  # by descriptor: a path this deep is longer than PATH_MAX
        for level in range(1000):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
            if level in (0, 99, 999):
                os.close(os.open("f.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    catalog = _scan(root)
    assert sorted(catalog.skills) == ["deep", "ok"]  # the neighbour, and the deep skill itself
    served = {f.rel for f in catalog.skills["deep"].files}
    assert served == {"SKILL.md", "d/f.md", "d/" * 99 + "d/f.md"}  # the file a thousand levels down is not
    [problem] = [p for p in catalog.problems if p.skill == "deep"]
    assert problem.reason is ProblemReason.UNADDRESSABLE_FILENAME
    assert "longer than" in problem.detail


def test_a_chain_of_nested_skills_is_served_down_to_the_bound_and_walked_once_per_level(
    root: Path, visits: _Visits
) -> None:
    length = 300
    _skill(root / "ok", "ok")
    here = _skill(root / "chain", "chain")
    for i in range(1, length):
        here = _skill(here / f"n{i}", f"n{i}")
    catalog = _scan(root)
    nested = [f"n{i}" for i in range(1, NESTED_MAX_DEPTH + 1)]
    assert sorted(catalog.skills) == sorted(["chain", "ok", *nested])
    deepest = catalog.skills[nested[-1]]
    assert deepest.skill_path == "/".join(["chain", *nested])  # published under the skills around it
    too_deep = [p for p in catalog.problems if p.reason is ProblemReason.NESTED_TOO_DEEP]
    first = too_deep[0]
    assert first.path == str(root / "chain" / "/".join([*nested, f"n{NESTED_MAX_DEPTH + 1}"]))
    assert first.level is Level.WARNING and first.skill == "chain"
    assert f"{NESTED_MAX_DEPTH + 1} levels below" in first.detail
    assert len({p.path for p in too_deep}) == len(too_deep)  # each reported once
    # Its files stay files of the skill around it: the deepest served skill lists the next SKILL.md.
    assert f"n{NESTED_MAX_DEPTH + 1}/SKILL.md" in {f.rel for f in deepest.files}
    # Every directory of the chain is listed by its top-level skill's walk and by the walks of the
    # nested skills above it, at most NESTED_MAX_DEPTH of them: before the bound, 45,150 listings.
    assert visits.directories <= (NESTED_MAX_DEPTH + 1) * (length + 1), visits.directories
