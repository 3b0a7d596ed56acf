"""Standalone: what a run leaves in its directory never reaches the next run, and a removal that
fails refuses the next run by name instead of letting it start beside the leftovers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from skill_mcp import trees
from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.runner import spawn_local

from .test_spawn import run

# A 1,100-level chain (made by descriptor: its path is longer than PATH_MAX) with a file every
# hundred levels, 20,000 files beside it, and the deepest level locked; prints TMPDIR.
LEAVE = """\
import os
tmp = os.environ['TMPDIR']
fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
for i in range(1100):
    os.mkdir('d', dir_fd=fd)
    new = os.open('d', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = new
    if i % 100 == 0:
        os.close(os.open('secret', os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
os.fchmod(fd, 0)
many = os.path.join(tmp, 'many')
os.mkdir(many)
for i in range(20000):
    os.close(os.open(os.path.join(many, str(i)), os.O_WRONLY | os.O_CREAT, 0o600))
print(tmp)
"""
# Entries in the run directory besides the run's own empty output directory (SKILL_OUTPUT_DIR).
LOOK = (
    "import os\nt, o = os.environ['TMPDIR'], os.environ['SKILL_OUTPUT_DIR']\n"
    "print(t, len([e for e in os.listdir(t) if os.path.join(t, e) != o or os.listdir(o)]))\n"
)


@pytest.mark.slow
def test_script_cannot_leave_a_deep_tree_and_many_files_for_the_next_run(root: Path) -> None:
    first = run(root, "python", LEAVE, timeout=120)
    assert first["status"] == "ok", first  # positive control: the tree was really made
    left = first["stdout"].strip()
    assert not os.path.lexists(left)
    second = run(root, "python", LOOK)
    tmp, count = second["stdout"].split()
    assert second["status"] == "ok" and tmp != left and count == "0"


def test_a_run_directory_that_cannot_be_removed_refuses_the_next_run_by_name(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = {"left": True}
    real = trees.remove_tree

    def remove(path: str) -> None:
        if failing["left"]:
            raise trees.NotRemoved(path, 1, "d: Device or resource busy")
        real(path)

    monkeypatch.setattr(spawn_local, "remove_tree", remove)
    from .helpers import make_runner

    runner: Any = make_runner()
    first = run(root, "python", LOOK, runner=runner)
    assert first["status"] == "ok" and any("could not be removed" in n for n in first["notes"]), first
    kept = first["stdout"].split()[0]
    assert os.path.isdir(kept)  # what the failed removal left is still there
    with pytest.raises(SkillMcpError) as refused:
        run(root, "python", LOOK, runner=runner)
    assert refused.value.reason is Refusal.CLEANUP_PENDING and refused.value.data["path"] == kept
    # Positive control: once the directory can go, the next run removes it first, then runs clean.
    failing["left"] = False
    third = run(root, "python", LOOK, runner=runner)
    assert third["status"] == "ok" and third["stdout"].split()[1] == "0" and not os.path.lexists(kept)


def test_script_cannot_make_the_oom_killer_choose_the_server_first(root: Path) -> None:
    out = run(root, "python", "import os\nprint(open('/proc/self/oom_score_adj').read().strip())\n")
    assert out["status"] == "ok" and out["stdout"].strip() == "1000", out
    # Positive control: the server (this process) keeps its own score; only the script is raised.
    with open("/proc/self/oom_score_adj", encoding="ascii") as fh:
        assert fh.read().strip() != "1000"


def test_the_exec_shim_marks_the_value_the_limits_name() -> None:
    from skill_mcp import limits
    from skill_mcp.runner import _exec_shim

    assert _exec_shim.OOM_SCORE_ADJ == limits.SCRIPT_OOM_SCORE_ADJ == 1000
