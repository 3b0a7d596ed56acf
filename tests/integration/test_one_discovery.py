"""One discovery, one answer: ``index``, ``list`` and the server agree on every tree.

Each tree is read three ways - ``skill-mcp index --json``, ``skill-mcp list --json`` and a real
server through the SDK client (every page of ``skill_list``) - and the three must name the same
skills. ``index`` must also list every pack whose skills are served, and a pack it lists must
not lose its skills to a ``no-skill-md`` warning.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.config import BUNDLED_ROOT
from tests.cli.helpers import as_json, run, tree
from tests.integration.harness import build_tree, connect

REPO = Path(__file__).resolve().parents[2]
REALWORLD = REPO / "tests" / "fixtures" / "realworld"


def _lock(root: Path) -> None:
    done = run("pack", "lock", str(root))
    assert done.returncode == 0, done.stderr


def nested_packs(root: Path) -> Path:
    """``root/<group>/<pack>/pack.json`` beside a plain skill and a first-level pack."""
    tree(root / "team-a" / "writing")
    (root / "team-a" / "writing" / "broken").rename(root / "team-a" / "writing" / "delta")
    (root / "team-a" / "writing" / "delta" / "SKILL.md").write_text(
        "---\nname: delta\ndescription: Delta checks. Use when checking.\n---\nDelta.\n", encoding="utf-8"
    )
    _lock(root / "team-a" / "writing")
    shutil.copytree(REPO / "tests" / "fixtures" / "realworld" / "skills" / "pdf", root / "plain" / "pdf")
    top = root / "top-pack"
    shutil.copytree(REALWORLD / "skills" / "docx", top / "skills" / "docx")
    _lock(top)
    return root


def _trees(base: Path) -> dict[str, Path]:
    cli_tree = tree(base / "cli-tree")
    return {
        "realworld": REALWORLD,
        "realworld-skills": REALWORLD / "skills",
        "bundled": BUNDLED_ROOT,
        "repository (the skillmcp configuration's --packs-root .)": REPO,
        "integration-tree": build_tree(base / "integration-tree"),
        "cli-tree": cli_tree,
        "nested-packs": nested_packs(base / "nested"),
        "nested-packs-parent": base / "nested" / "team-a",
    }


async def _served(root: Path) -> set[str]:
    names: set[str] = set()
    async with connect(root, "legacy") as client:
        cursor: str | None = None
        while True:
            args: dict[str, Any] = {"limit": 200} if cursor is None else {"limit": 200, "cursor": cursor}
            page = (await client.call_tool("skill_list", args)).structured_content
            assert page is not None
            names.update(entry["name"] for entry in page["skills"])
            cursor = page.get("nextCursor")
            if not cursor:
                return names


def _cli(*args: str) -> Any:
    done = run(*args)
    assert done.returncode == 0, done.stderr
    return as_json(done)


@pytest.mark.slow
@pytest.mark.anyio
async def test_index_list_and_the_server_name_the_same_skills_on_every_tree(tmp_path: Path) -> None:
    for label, root in _trees(tmp_path).items():
        index = _cli("index", "--json", "--skills-dir", str(root))
        listed = _cli("list", "--json", "--skills-dir", str(root))
        indexed = {row["name"] for row in index["skills"]}
        assert indexed == {row["name"] for row in listed["skills"]}, label
        assert indexed == await _served(root), label
        # Every pack index names has its skills served or each one refused by name.
        refused = {p.get("skill") for p in index["problems"] if p["level"] == "error"}
        for pack in index["packs"]:
            if "refused" in pack:
                continue
            pinned = {row["name"] for row in index["skills"] if row.get("pack") == pack["name"]}
            assert len(pinned | (refused - {None})) >= pack["skills"], (label, pack)


@pytest.mark.slow
def test_packs_below_the_first_level_are_served_not_warned_about(tmp_path: Path) -> None:
    root = nested_packs(tmp_path / "nested")
    index = _cli("index", "--json", "--skills-dir", str(root))
    listed = _cli("list", "--json", "--skills-dir", str(root))
    served = {row["name"]: row.get("pack") for row in listed["skills"]}
    assert served == {"alpha": "writing", "beta": "writing", "delta": "writing", "docx": "top-pack"}
    assert sorted(Path(p["path"]).name for p in index["packs"]) == ["top-pack", "writing"]
    warned = {Path(p["path"]).name for p in index["problems"] if p["reason"] == "no-skill-md"}
    # The group directory leads to a pack, so it is not a skill-less directory; "plain" (a
    # skill one level too deep, in no pack) is still reported.
    assert "team-a" not in warned and "plain" in warned


@pytest.mark.slow
def test_the_seed_example_serves_the_pack_found_in_the_repository() -> None:
    index = _cli("index", "--json", "--packs-root", str(REPO))
    listed = _cli("list", "--json", "--packs-root", str(REPO))
    assert [Path(p["path"]) for p in index["packs"]] == [BUNDLED_ROOT]
    assert len(listed["skills"]) == index["packs"][0]["skills"] == 51


@pytest.mark.slow
def test_a_build_output_copy_of_a_pack_is_not_served_beside_its_original(tmp_path: Path) -> None:
    # `pip wheel .` in a checkout leaves build/lib/<package>/<pack>: a copy of the pack under
    # src/. Served together, every skill of both would be refused as a duplicate name.
    root = tmp_path / "checkout"
    shutil.copytree(BUNDLED_ROOT, root / "src" / "pkg" / "bundled")
    shutil.copytree(BUNDLED_ROOT, root / "build" / "lib" / "pkg" / "bundled")
    index = _cli("index", "--json", "--packs-root", str(root))
    listed = _cli("list", "--json", "--packs-root", str(root))
    assert [Path(p["path"]) for p in index["packs"]] == [root / "src" / "pkg" / "bundled"]
    assert len(listed["skills"]) == 51
    assert not [p for p in index["problems"] if p["reason"] == "duplicate-name"]
    # Positive control: the same copy under a plain grouping directory is a pack like any other.
    shutil.move(str(root / "build"), str(root / "other"))
    again = _cli("index", "--json", "--packs-root", str(root))
    assert len(again["packs"]) == 2


def test_a_group_without_a_pack_below_is_still_reported(tmp_path: Path) -> None:
    (tmp_path / "root" / "group" / "deeper" / "skill").mkdir(parents=True)
    (tmp_path / "root" / "group" / "deeper" / "skill" / "SKILL.md").write_text(
        "---\nname: skill\ndescription: x\n---\n", encoding="utf-8"
    )
    index = _cli("index", "--json", "--skills-dir", str(tmp_path / "root"))
    assert index["skills"] == []
    assert [(Path(p["path"]).name, p["reason"]) for p in index["problems"]] == [("group", "no-skill-md")]
