"""Discovery: layouts, naming, links, duplicates, and the rule that nothing goes quiet."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.reasons import ExtensionRule, Level, ProblemReason
from tests.helpers import write_skill


def skill(directory: Path, name: str | None = None, *, extra: str = "", body: str = "# Steps\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    front = f"name: {name or directory.name}\n" if name != "" else ""
    (directory / "SKILL.md").write_text(f"---\n{front}description: does {directory.name}\n{extra}---\n{body}")
    return directory


def scan(*roots: Path) -> Catalog:
    return build_catalog(load_settings([str(r) for r in roots], {}))


def reasons_at(catalog: Catalog, path: Path) -> set[ProblemReason]:
    return {p.reason for p in catalog.problems if p.path == str(path)}


def test_three_layouts_are_found(tmp_path: Path) -> None:
    skill(tmp_path / "solo")
    multi = tmp_path / "multi"
    skill(multi / "alpha")
    skill(multi / "skills" / "beta")
    catalog = scan(tmp_path / "solo", multi)
    assert sorted(catalog.skills) == ["alpha", "beta", "solo"]


def test_root_that_is_a_skill_is_named_by_the_root_directory(tmp_path: Path) -> None:
    skill(tmp_path / "my-root", name="something-else")
    catalog = scan(tmp_path / "my-root")
    assert list(catalog.skills) == ["my-root"]
    assert ProblemReason.NAME_MISMATCH in reasons_at(catalog, tmp_path / "my-root")


def test_frontmatter_name_never_chooses_the_served_name(tmp_path: Path) -> None:
    skill(tmp_path / "weather")
    skill(tmp_path / "impostor", name="weather")
    catalog = scan(tmp_path)
    assert catalog.skills["impostor"].name == "impostor"
    assert catalog.skills["weather"].directory == (tmp_path / "weather").resolve()
    assert catalog.skills["impostor"].skills_list_excluded is ExtensionRule.NAME_MISMATCH
    assert catalog.skills["weather"].skills_list_excluded is None


def test_two_roots_claiming_one_name_are_both_refused(tmp_path: Path) -> None:
    skill(tmp_path / "a" / "shared")
    skill(tmp_path / "b" / "shared")
    skill(tmp_path / "b" / "neighbour")
    catalog = scan(tmp_path / "a", tmp_path / "b")
    assert "shared" not in catalog.skills
    assert "neighbour" in catalog.skills
    dupes = [p for p in catalog.problems if p.reason is ProblemReason.DUPLICATE_NAME]
    assert {p.path for p in dupes} == {str(tmp_path / "a" / "shared"), str(tmp_path / "b" / "shared")}


def test_symlinked_skill_inside_the_root_is_served_under_its_target_name(tmp_path: Path) -> None:
    root = tmp_path / "root"
    skill(root / "shared" / "bar")
    root.joinpath("skills").mkdir()
    os.symlink("../shared/bar", root / "skills" / "foo")
    catalog = scan(root)
    assert "bar" in catalog.skills and "foo" not in catalog.skills
    assert ProblemReason.NAME_MISMATCH in reasons_at(catalog, root / "skills" / "foo")


def test_symlinked_skill_leaving_the_root_is_reported_not_served(tmp_path: Path) -> None:
    skill(tmp_path / "outside" / "escapee")
    root = tmp_path / "root"
    skill(root / "legit")
    os.symlink(tmp_path / "outside" / "escapee", root / "escapee")
    catalog = scan(root)
    assert "escapee" not in catalog.skills
    assert "legit" in catalog.skills  # positive control
    assert reasons_at(catalog, root / "escapee") == {ProblemReason.SYMLINK_ESCAPE}


def test_directory_reached_twice_is_one_skill_without_a_duplicate(tmp_path: Path) -> None:
    skill(tmp_path / "twice")
    os.symlink("twice", tmp_path / "again-link")
    catalog = scan(tmp_path)
    assert list(catalog.skills) == ["twice"]
    assert not [p for p in catalog.problems if p.reason is ProblemReason.DUPLICATE_NAME]
    assert catalog.skills["twice"].found_at == str(tmp_path / "twice")


def test_file_link_leading_out_of_a_skill_is_never_served_and_is_reported(tmp_path: Path) -> None:
    s = skill(tmp_path / "leaky")
    (tmp_path / "secret.txt").write_text("nope")
    os.symlink(tmp_path / "secret.txt", s / "secret.txt")
    (s / "ok.txt").write_text("fine")
    os.symlink("ok.txt", s / "inside-link.txt")
    catalog = scan(tmp_path / "leaky")
    rels = [f.rel for f in catalog.skills["leaky"].files]
    assert "secret.txt" not in rels
    assert "ok.txt" in rels and "inside-link.txt" in rels
    assert reasons_at(catalog, s / "secret.txt") == {ProblemReason.SYMLINK_ESCAPE}


def test_unaddressable_special_and_looping_entries_are_reported(tmp_path: Path) -> None:
    s = skill(tmp_path / "odd")
    (s / "50%.txt").write_text("percent")
    (s / "back\\slash.txt").write_text("backslash")
    (s / "tab\there.txt").write_text("control")
    os.mkfifo(s / "pipe")
    (s / "sub").mkdir()
    os.symlink("..", s / "sub" / "up")
    catalog = scan(tmp_path / "odd")
    assert [f.rel for f in catalog.skills["odd"].files] == ["SKILL.md"]
    for name in ("50%.txt", "back\\slash.txt", "tab\there.txt"):
        assert reasons_at(catalog, s / name) == {ProblemReason.UNADDRESSABLE_FILENAME}
    assert reasons_at(catalog, s / "pipe") == {ProblemReason.SPECIAL_FILE}
    assert reasons_at(catalog, s / "sub" / "up") == {ProblemReason.SYMLINK_LOOP}


def test_non_utf8_filename_is_reported(tmp_path: Path) -> None:
    s = skill(tmp_path / "bytes")
    with open(os.path.join(os.fsencode(s), b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"x")
    catalog = scan(tmp_path / "bytes")
    assert [f.rel for f in catalog.skills["bytes"].files] == ["SKILL.md"]
    assert ProblemReason.UNADDRESSABLE_FILENAME in {p.reason for p in catalog.problems}


def test_nested_skill_is_published_flat_and_stays_a_file_of_its_parent(tmp_path: Path) -> None:
    parent = skill(tmp_path / "parent")
    skill(parent / "reference" / "child")
    catalog = scan(tmp_path)
    assert {"parent", "child"} <= set(catalog.skills)
    assert "reference/child/SKILL.md" in [f.rel for f in catalog.skills["parent"].files]
    assert [f.rel for f in catalog.skills["child"].files] == ["SKILL.md"]


@pytest.mark.parametrize("bad", ["Upper", "under_score", "-lead", "trail-", "dou--ble"])
def test_directory_that_cannot_be_a_skill_name_is_refused(tmp_path: Path, bad: str) -> None:
    skill(tmp_path / bad, name="")
    catalog = scan(tmp_path)
    assert bad not in catalog.skills
    assert reasons_at(catalog, tmp_path / bad) == {ProblemReason.INVALID_NAME}


def test_missing_root_is_reported_and_other_roots_still_serve(tmp_path: Path) -> None:
    skill(tmp_path / "real" / "ok")
    catalog = scan(tmp_path / "nope", tmp_path / "real")
    assert "ok" in catalog.skills
    assert reasons_at(catalog, tmp_path / "nope") == {ProblemReason.ROOT_MISSING}


def test_every_directory_of_a_problem_tree_is_served_or_reported(tmp_path: Path) -> None:
    """Walk a tree holding every problem kind; nothing may be dropped in silence."""
    root = tmp_path / "root"
    skill(root / "good")
    (root / "empty").mkdir()
    (root / "bad-yaml").mkdir()
    (root / "bad-yaml" / "SKILL.md").write_text("---\nname: [\n---\n")
    (root / "no-description").mkdir()
    (root / "no-description" / "SKILL.md").write_text("---\nname: no-description\n---\n")
    skill(root / "mismatch", name="other")
    skill(root / "BadName", name="")
    skill(
        root / "declares", extra="mcp-host:\n  version: 1\n  run:\n    - script: gone.py\n      interpreter: python\n"
    )
    skill(root / "broken-block", extra="mcp-host:\n  version: 1\n  run: [\n")
    skill(root / "future-block", extra="mcp-host:\n  version: 9\n")
    skill(root / "spec", extra="compatibility: 5\n")
    skill(tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", root / "escape")
    skill(tmp_path / "other-root" / "good")
    catalog = build_catalog(load_settings([str(root), str(tmp_path / "other-root")], {}))
    reported = {p.path for p in catalog.problems}
    served = {s.found_at for s in catalog.skills.values()}
    for entry in sorted(root.iterdir()):
        assert str(entry) in served | reported, f"{entry} was dropped in silence"
    assert {p.reason for p in catalog.problems} >= {
        ProblemReason.NO_SKILL_MD,
        ProblemReason.FRONTMATTER_PARSE,
        ProblemReason.FRONTMATTER_INVALID,
        ProblemReason.NAME_MISMATCH,
        ProblemReason.INVALID_NAME,
        ProblemReason.DECLARED_SCRIPT_MISSING,
        ProblemReason.DECLARATION_INVALID,
        ProblemReason.DECLARATION_VERSION,
        ProblemReason.SPEC_WARNING,
        ProblemReason.SYMLINK_ESCAPE,
        ProblemReason.DUPLICATE_NAME,
    }
    assert all(p.level in (Level.ERROR, Level.WARNING) for p in catalog.problems)


def test_packed_skill_whose_files_differ_from_the_pins_is_refused_alone(tmp_path: Path) -> None:
    from skill_mcp.catalog.packs import PinnedSkill, render_pack

    pack = tmp_path / "pack"
    for name in ("kept", "tampered"):
        skill(pack / name)
    memo_catalog = scan(pack)
    pins = []
    for name in ("kept", "tampered"):
        s = memo_catalog.skills[name]
        import hashlib

        files = {f.rel: "sha256:" + hashlib.sha256((s.directory / f.rel).read_bytes()).hexdigest() for f in s.files}
        pins.append(PinnedSkill(name=name, path=name, files=files))
    (pack / "pack.json").write_text(render_pack("demo", "1.0.0", pins))
    assert sorted(scan(pack).skills) == ["kept", "tampered"]  # positive control: pins match
    (pack / "tampered" / "SKILL.md").write_text("---\nname: tampered\ndescription: changed\n---\n")
    catalog = scan(pack)
    assert sorted(catalog.skills) == ["kept"]
    assert catalog.skills["kept"].pack == "demo"
    assert reasons_at(catalog, pack / "tampered") == {ProblemReason.DIGEST_MISMATCH}


def test_interpreter_build_output_is_not_a_skill_file(tmp_path: Path) -> None:
    s = skill(tmp_path / "compiled")
    (s / "scripts" / "__pycache__").mkdir(parents=True)
    (s / "scripts" / "tool.py").write_text("print(1)\n")
    (s / "scripts" / "__pycache__" / "tool.cpython-311.pyc").write_bytes(b"\0")
    catalog = scan(tmp_path / "compiled")
    assert [f.rel for f in catalog.skills["compiled"].files] == ["SKILL.md", "scripts/tool.py"]
    assert not catalog.problems


def test_a_build_pauses_the_collector_and_leaves_it_as_it_found_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    from skill_mcp.catalog import discover

    write_skill(tmp_path, "one")
    seen: list[bool] = []
    real = discover._load_all

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(discover, "_load_all", spy)
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            build_catalog(load_settings([str(tmp_path)], {}))
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False, False]


def test_a_loader_defect_costs_only_the_skill_that_met_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Denied: one directory whose load raises ending the catalog's build for every skill, as a
    tree nested past the recursion limit and a deep pack.json did before their own refusals.
    Played here by a loader that raises RecursionError for one directory, standing for the next
    such defect. That directory is refused (``load-failed``, level error, the traceback in the
    log); the neighbour is served; the failure is not cached: the next build serves the skill."""
    from skill_mcp.catalog import discover

    root = tmp_path / "skills"
    skill(root / "bad")
    skill(root / "ok")
    settings = load_settings([str(root)], {"SKILL_MCP_CACHE_DIR": str(tmp_path / "cache")})
    real = discover.load_skill

    def defective(real_dir: Path, found_at: Path, root_real: Path) -> Any:
        if real_dir.name == "bad":
            raise RecursionError("maximum recursion depth exceeded")
        return real(real_dir, found_at, root_real)

    with monkeypatch.context() as m:
        m.setattr(discover, "load_skill", defective)
        catalog = build_catalog(settings)
    assert sorted(catalog.skills) == ["ok"]
    [problem] = [p for p in catalog.problems if p.path.endswith("/bad")]
    assert problem.reason is ProblemReason.LOAD_FAILED and problem.level is Level.ERROR
    assert "RecursionError" in problem.detail
    assert any(r.exc_info for r in caplog.records if r.getMessage() == "a skill could not be loaded")
    assert sorted(build_catalog(settings).skills) == ["bad", "ok"]
