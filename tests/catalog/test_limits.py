"""The per-skill limits cost a large bundle its extra files, never its instructions.

A skill with more than 512 files or 16 MiB is served with SKILL.md, its declared scripts and
the files nearest the top, up to the limits; what is left out is reported once
(``files-over-limit``). A SKILL.md over 1 MiB is still refused (``skill-too-large``): see
docs/reasons.md for why it is not cut.
"""

from __future__ import annotations

from pathlib import Path

from skill_mcp.catalog import build_catalog
from skill_mcp.catalog.files import read_body
from skill_mcp.catalog.walk import MAX_FILES, MAX_TOTAL_BYTES, MAX_WALK_ENTRIES
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.reasons import ExtensionRule, Level, ProblemReason
from tests.integration.harness import settle_clock

SCRIPTED = """---
name: {name}
description: {name} fills forms. Use when a form must be filled.
mcp-host:
  version: 1
  run:
    - script: scripts/fill.py
      interpreter: python
---
# Steps

1. Run scripts/fill.py.
"""


def scan(root: Path) -> Catalog:
    return build_catalog(load_settings([str(root)], {}))


def _skill(root: Path, name: str) -> Path:
    d = root / name
    (d / "scripts").mkdir(parents=True)
    (d / "SKILL.md").write_text(SCRIPTED.format(name=name), encoding="utf-8")
    (d / "scripts" / "fill.py").write_text("print('filled')\n", encoding="utf-8")
    return d


def _reasons(catalog: Catalog, name: str) -> dict[ProblemReason, Level]:
    return {p.reason: p.level for p in catalog.problems if p.skill == name}


def test_a_skill_with_too_many_files_is_served_with_its_instructions_and_scripts(tmp_path: Path) -> None:
    d = _skill(tmp_path, "many")
    (d / "assets").mkdir()
    for i in range(MAX_FILES + 40):  # "assets" sorts before "scripts"
        (d / "assets" / f"a{i:04}.txt").write_text("x", encoding="utf-8")
    catalog = scan(tmp_path)
    skill = catalog.skills["many"]
    rels = {f.rel for f in skill.files}
    assert len(rels) == MAX_FILES
    assert {"SKILL.md", "scripts/fill.py"} <= rels
    assert skill.missing_scripts == ()
    assert "Run scripts/fill.py" in read_body(skill)
    # The tools serve the capped files; the extension never publishes a cut manifest.
    assert _reasons(catalog, "many") == {
        ProblemReason.FILES_OVER_LIMIT: Level.WARNING,
        ProblemReason.EXTENSION_EXCLUDED: Level.ERROR,
    }
    assert skill.skills_list_excluded is ExtensionRule.TOO_MANY_FILES
    assert skill not in catalog.extension_listed
    detail = next(p.detail for p in catalog.problems if p.reason == ProblemReason.FILES_OVER_LIMIT)
    assert detail.startswith("42 files")  # 552 assets + 2 = 554 files, 512 served


def test_a_skill_over_the_byte_limit_loses_the_big_file_not_the_rest(tmp_path: Path) -> None:
    d = _skill(tmp_path, "heavy")
    (d / "assets").mkdir()
    (d / "assets" / "font.ttf").write_bytes(b"\0" * (MAX_TOTAL_BYTES + 1))
    (d / "references").mkdir()
    (d / "references" / "guide.md").write_text("# Guide\n", encoding="utf-8")
    catalog = scan(tmp_path)
    rels = {f.rel for f in catalog.skills["heavy"].files}
    assert rels == {"SKILL.md", "scripts/fill.py", "references/guide.md"}
    assert _reasons(catalog, "heavy") == {
        ProblemReason.FILES_OVER_LIMIT: Level.WARNING,
        ProblemReason.EXTENSION_EXCLUDED: Level.ERROR,
    }
    assert catalog.skills["heavy"].skills_list_excluded is ExtensionRule.TOO_LARGE
    assert "assets/font.ttf" in next(p.detail for p in catalog.problems if p.skill == "heavy")


def test_files_nearer_the_top_are_kept_first(tmp_path: Path) -> None:
    d = _skill(tmp_path, "deep")
    (d / "a" / "b").mkdir(parents=True)
    for i in range(MAX_FILES):
        (d / "a" / "b" / f"x{i:04}").write_text("x", encoding="utf-8")
    (d / "z-top.md").write_text("top\n", encoding="utf-8")
    rels = {f.rel for f in scan(tmp_path).skills["deep"].files}
    assert "z-top.md" in rels and len(rels) == MAX_FILES


def test_a_huge_tree_is_walked_in_bounded_time_and_says_the_count_is_a_floor(tmp_path: Path) -> None:
    d = _skill(tmp_path, "huge")
    (d / "node_modules").mkdir()
    for i in range(MAX_WALK_ENTRIES + 10):
        (d / "node_modules" / f"m{i:05}").write_bytes(b"")
    catalog = scan(tmp_path)
    assert len(catalog.skills["huge"].files) == MAX_FILES
    detail = next(p.detail for p in catalog.problems if p.reason == ProblemReason.FILES_OVER_LIMIT)
    assert detail.startswith("at least ") and f"stopped after {MAX_WALK_ENTRIES} entries" in detail


def test_a_skill_within_the_limits_has_no_limit_problem(tmp_path: Path) -> None:
    _skill(tmp_path, "small")
    catalog = scan(tmp_path)
    assert {f.rel for f in catalog.skills["small"].files} == {"SKILL.md", "scripts/fill.py"}
    assert _reasons(catalog, "small") == {}


def test_a_skill_md_over_one_mib_is_refused_with_a_reason_that_says_what_to_do(tmp_path: Path) -> None:
    d = tmp_path / "long"
    d.mkdir()
    (d / "SKILL.md").write_text("---\nname: long\ndescription: Long.\n---\n" + "x" * (1024 * 1024), encoding="utf-8")
    catalog = scan(tmp_path)
    assert "long" not in catalog.skills
    problem = next(p for p in catalog.problems if p.skill == "long")
    assert problem.reason == ProblemReason.SKILL_TOO_LARGE and problem.level == Level.ERROR
    assert "references/" in problem.detail


def test_a_skill_of_8000_unservable_names_names_the_first_twenty_and_counts_the_rest(tmp_path: Path) -> None:
    """Denied: one skill's 8,000 files with names the tools cannot address making 8,000 problems,
    held in memory, written to the catalog cache (about 1 MB a skill) and counted by every
    listing. Twenty are named; one problem more counts the rest. The positive control: its
    addressable files and its neighbour are served, and a skill with a few such names has each
    one named."""
    from skill_mcp.catalog.walk import MAX_REPORTED

    root = tmp_path / "skills"
    many = _skill(root, "many")
    few = _skill(root, "few")
    for i in range(8000):
        (many / f"bad%{i:04d}.md").write_bytes(b"")
    for i in range(3):
        (few / f"bad%{i}.md").write_bytes(b"")
    settle_clock(root)  # older than the cache's racy margin: both entries are written
    settings = load_settings([str(root)], {"SKILL_MCP_CACHE_DIR": str(tmp_path / "cache")})
    catalog = build_catalog(settings)
    assert sorted(catalog.skills) == ["few", "many"]
    assert {f.rel for f in catalog.skills["many"].files} == {"SKILL.md", "scripts/fill.py"}
    mine = [p for p in catalog.problems if p.skill == "many"]
    assert all(p.reason is ProblemReason.UNADDRESSABLE_FILENAME and p.level is Level.WARNING for p in mine)
    named, [counted] = mine[:-1], mine[-1:]
    assert [p.path for p in named] == [str(many / f"bad%{i:04d}.md") for i in range(MAX_REPORTED)]
    assert counted.path == str(many) and f"and {8000 - MAX_REPORTED} more entries" in counted.detail
    assert len([p for p in catalog.problems if p.skill == "few"]) == 3
    [cache_file] = list((tmp_path / "cache").glob("catalog-*"))
    assert cache_file.stat().st_size < 64 * 1024  # 8,000 problems wrote about 1 MB
    warm = build_catalog(settings)  # from the cache: the same problems
    assert [p for p in warm.problems if p.skill == "many"] == mine
