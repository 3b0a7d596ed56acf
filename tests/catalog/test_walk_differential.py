"""``walk.walk_skill`` against the walk it replaced (``tests/catalog/reference_walk.py``).

The walk takes one ``lstat`` per entry, reuses the stat its parent took of each subdirectory,
remembers each name's check and skips the ranking when every file fits; the result must be the
reference's, field for field (files, problems, nested skills, limits, stamps, stampable), on
generated trees of files, directories, links (inside, outside, dangling, looping), FIFOs,
unaddressable names, build output, nested skills and trees over the limits. A planted bug shows
the comparison can fail.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skill_mcp.catalog import walk
from skill_mcp.catalog.walk import MAX_FILES, MAX_TOTAL_BYTES, MAX_WALK_ENTRIES, walk_skill
from tests.catalog.reference_walk import walk_skill as reference_walk

NAMES = ["a", "b.md", "SKILL.md", "scripts", "run.sh", "__pycache__", "-x", "a b", "bad\\name", "é.md", "x" * 70, "z"]
KINDS = ["file", "file", "file", "dir", "dir", "link-in", "link-dir-up", "link-out", "dangling", "fifo", "big"]

Spec = list[tuple[int, str, str]]  # (parent index among the directories made so far, name, kind)


def _build(root: Path, spec: Spec) -> None:
    (root / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n")
    dirs = [root]
    for parent_index, name, kind in spec:
        parent = dirs[parent_index % len(dirs)]
        path = parent / name
        if os.path.lexists(path):
            continue
        if kind == "file":
            path.write_bytes(b"x" * (len(name) * 3))
        elif kind == "big":
            with open(path, "wb") as handle:
                handle.truncate(MAX_TOTAL_BYTES // 3)  # sparse: the size without the disk
        elif kind == "dir":
            path.mkdir()
            dirs.append(path)
        elif kind == "link-in":
            path.symlink_to(root / "SKILL.md")
        elif kind == "link-dir-up":
            path.symlink_to(parent)  # a loop back into the walk
        elif kind == "link-out":
            path.symlink_to(root.parent)
        elif kind == "dangling":
            path.symlink_to(root / "nowhere")
        elif kind == "fifo":
            os.mkfifo(path)


def _same(root: Path, priority: frozenset[str] = frozenset()) -> bool:
    return walk_skill(root, root.name, priority) == reference_walk(root, root.name, priority)


SPECS = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(NAMES), st.sampled_from(KINDS)), max_size=25)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=150)
@given(SPECS, st.sampled_from([frozenset(), frozenset({"run.sh"}), frozenset({"scripts/run.sh"})]))
def test_the_walk_equals_the_reference_on_generated_trees(spec: Spec, priority: frozenset[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "s"
        root.mkdir()
        _build(root, spec)
        assert _same(root, priority)


@pytest.mark.parametrize("count", [MAX_FILES - 1, MAX_FILES + 3, MAX_WALK_ENTRIES + 2])
def test_the_walk_equals_the_reference_at_the_count_limits(tmp_path: Path, count: int) -> None:
    root = tmp_path / "s"
    (root / "many").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n")
    for index in range(count):
        (root / "many" / f"f{index:05d}").write_bytes(b"")
    assert _same(root)


def test_the_walk_equals_the_reference_at_the_byte_limit(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n")
    for name, size in (("a", MAX_TOTAL_BYTES // 2), ("b", MAX_TOTAL_BYTES // 2), ("c", 1)):
        with open(root / name, "wb") as handle:
            handle.truncate(size)
    walk = walk_skill(root, "s")
    assert walk.left_out == 1 and _same(root)


def test_a_planted_bug_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # negative control
    root = tmp_path / "s"
    root.mkdir()
    _build(root, [(0, "bad\\name", "file"), (0, "b.md", "file")])
    assert _same(root)
    monkeypatch.setattr(walk, "name_problem", lambda name: None)  # every name passes
    assert not _same(root)
