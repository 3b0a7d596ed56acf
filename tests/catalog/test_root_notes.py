"""``catalog.roots``: what is said at start about a root, and the hints for where skills sit."""

from __future__ import annotations

from pathlib import Path

import pytest

from skill_mcp.catalog import files, packs
from skill_mcp.catalog.roots import PACK_JSON, SKILL_MD, probe_roots, where_skills_sit
from skill_mcp.config import load_settings

GOOD = "---\nname: {name}\ndescription: {name} does a thing. Use when testing.\n---\n# {name}\n\n1. Step.\n"


def _put(root: Path, rel: str, name: str = "x") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(GOOD.format(name=name), encoding="utf-8")


def test_the_names_are_the_catalogs() -> None:
    from skill_mcp.catalog.layouts import CONTAINER_NAMES
    from skill_mcp.catalog.roots import CONTAINER

    assert (SKILL_MD, PACK_JSON, frozenset({CONTAINER})) == (files.SKILL_MD, packs.PACK_JSON, CONTAINER_NAMES)


@pytest.mark.parametrize(
    ("layout", "said"),
    [
        ("cat/pdf/SKILL.md", "SKILL.md found two levels below it ({root}/cat/pdf/SKILL.md): name {root}/cat as a root"),
        ("a/b/c/SKILL.md", None),  # three levels down is beyond the hint
        ("pdf/skill.md", "found {root}/pdf/skill.md: the file must be named SKILL.md"),
        ("Skill.MD", "found {root}/Skill.MD: the file must be named SKILL.md"),
        ("cat/.hidden/SKILL.md", None),  # hidden directories are not searched, nor hinted at
    ],
)
def test_where_skills_sit_names_what_it_saw(tmp_path: Path, layout: str, said: str | None) -> None:
    _put(tmp_path, layout)
    hint = where_skills_sit(str(tmp_path))
    assert (hint is None) if said is None else (hint is not None and said.format(root=tmp_path) in hint)


def test_a_served_root_has_no_note_and_a_wrong_one_has_one_each(tmp_path: Path) -> None:
    good, deep, empty = tmp_path / "good", tmp_path / "deep", tmp_path / "empty"
    _put(good, "alpha/SKILL.md", "alpha")
    _put(deep, "cat/pdf/SKILL.md", "pdf")
    empty.mkdir()
    settings = load_settings([str(good), str(deep), str(empty), str(tmp_path / "typo")], {})
    notes = {n.path: (str(n.reason), n.detail) for n in probe_roots(settings)}
    assert set(notes) == {str(deep), str(empty), str(tmp_path / "typo")}  # the good root: nothing
    assert notes[str(tmp_path / "typo")][0] == "root-missing"
    assert notes[str(deep)][0] == "root-empty" and f"name {deep}/cat as a root" in notes[str(deep)][1]
    assert "hidden directories are not searched" in notes[str(empty)][1]


def test_a_root_with_its_skills_in_a_container_is_decided_without_the_scanner(tmp_path: Path) -> None:
    import subprocess
    import sys

    _put(tmp_path, "skills/alpha/SKILL.md", "alpha")
    code = (
        "import sys; from skill_mcp.catalog.roots import probe_roots; from skill_mcp.config import load_settings;"
        f"assert probe_roots(load_settings([{str(tmp_path)!r}], {{}})) == ();"
        "assert 'skill_mcp.catalog.discover' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_skills_container_and_a_pack_below_a_group_serve(tmp_path: Path) -> None:
    _put(tmp_path / "a", "skills/alpha/SKILL.md", "alpha")
    (tmp_path / "b" / "group" / "pack").mkdir(parents=True)
    (tmp_path / "b" / "group" / "pack" / "pack.json").write_text("{}", encoding="utf-8")
    _put(tmp_path / "b", "group/pack/beta/SKILL.md", "beta")
    settings = load_settings([str(tmp_path / "a"), str(tmp_path / "b")], {})
    assert probe_roots(settings) == ()
