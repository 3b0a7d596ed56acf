"""Packs: schema, strict loading, digest verification, and deterministic ``pack lock``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skill_mcp.catalog.packs import PACK_JSON, Pack, apply_packs, load_pack, parse_pack, render_pack, verify_skill
from skill_mcp.catalog.skill import load_skill
from skill_mcp.models import Problem, Skill
from skill_mcp.reasons import Level, ProblemReason
from tests.catalog.pack_trees import lock, make_pack, write


def loaded(root: Path, name: str) -> Skill:
    real = Path(os.path.realpath(root / name))
    result = load_skill(real, root / name, Path(os.path.realpath(root)))
    assert result.skill is not None
    return result.skill


def test_pack_lock_pins_every_file_and_reads_phase_and_tags_from_metadata(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "pk")
    done = lock(root, "--name", "demo", "--version", "1.2.3")
    assert done.returncode == 0, done.stderr
    data = json.loads((root / PACK_JSON).read_text(encoding="utf-8"))
    assert data["schemaVersion"] == 1 and data["name"] == "demo" and data["version"] == "1.2.3"
    alpha = data["skills"][0]
    assert alpha["name"] == "alpha" and alpha["path"] == "alpha"
    assert set(alpha["files"]) == {"SKILL.md", "scripts/run.py"}
    assert all(d.startswith("sha256:") and len(d) == 71 for d in alpha["files"].values())
    assert alpha["phase"] == "verify" and alpha["tags"] == ["one", "two"]


def test_pack_lock_is_byte_identical_twice_and_keeps_name_and_version(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "pk")
    assert lock(root, "--name", "demo", "--version", "2.0.0").returncode == 0
    first = (root / PACK_JSON).read_bytes()
    again = lock(root)
    assert again.returncode == 0
    assert (root / PACK_JSON).read_bytes() == first
    assert lock(root, "--check").returncode == 0


def test_pack_lock_check_fails_when_a_file_changed_and_writes_nothing(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "pk")
    assert lock(root).returncode == 0
    before = (root / PACK_JSON).read_bytes()
    (root / "beta" / "SKILL.md").write_text("---\nname: beta\ndescription: changed.\n---\nx\n", encoding="utf-8")
    done = lock(root, "--check", "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["upToDate"] is False
    assert (root / PACK_JSON).read_bytes() == before


def test_render_is_independent_of_entry_order() -> None:
    from skill_mcp.catalog.packs import PinnedSkill

    a = PinnedSkill("a", "a", {"SKILL.md": "sha256:" + "0" * 64})
    b = PinnedSkill("b", "b", {"z": "sha256:" + "1" * 64, "SKILL.md": "sha256:" + "2" * 64})
    assert render_pack("p", "1", [a, b]) == render_pack("p", "1", [b, a])
    assert render_pack("p", "1", [a]).endswith("}\n")


def test_a_verified_skill_is_stamped_with_pack_phase_and_tags(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "pk")
    assert lock(root, "--name", "demo").returncode == 0
    kept, problems = apply_packs([loaded(root, "alpha"), loaded(root, "beta")], [root])
    assert problems == []
    assert [(s.name, s.pack, s.phase) for s in kept] == [("alpha", "demo", "verify"), ("beta", "demo", "verify")]


def test_tampered_skill_is_refused_with_digest_mismatch_and_its_neighbour_is_served(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "pk")
    assert lock(root).returncode == 0
    (root / "alpha" / "scripts" / "run.py").write_text("print('tampered')\n", encoding="utf-8")
    kept, problems = apply_packs([loaded(root, "alpha"), loaded(root, "beta")], [root])
    assert [s.name for s in kept] == ["beta"]
    assert [(p.reason, p.skill, p.level) for p in problems] == [(ProblemReason.DIGEST_MISMATCH, "alpha", Level.ERROR)]
    assert "scripts/run.py" in problems[0].detail


@pytest.mark.parametrize("change", ["add", "remove"])
def test_a_file_added_or_removed_after_lock_is_a_digest_mismatch(tmp_path: Path, change: str) -> None:
    root = make_pack(tmp_path / "pk")
    assert lock(root).returncode == 0
    if change == "add":
        write(root / "alpha" / "extra.txt", "new\n")
    else:
        (root / "alpha" / "scripts" / "run.py").unlink()
    pack = load_pack(root)
    assert isinstance(pack, Pack)
    problems = verify_skill(pack, loaded(root, "alpha"))
    assert [p.reason for p in problems] == [ProblemReason.DIGEST_MISMATCH]
    assert verify_skill(pack, loaded(root, "beta")) == []  # positive control


def test_a_skill_inside_a_pack_but_not_pinned_is_refused(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "pk")
    assert lock(root).returncode == 0
    write(root / "gamma" / "SKILL.md", "---\nname: gamma\ndescription: late arrival.\n---\nx\n")
    kept, problems = apply_packs([loaded(root, "gamma"), loaded(root, "beta")], [root])
    assert [s.name for s in kept] == ["beta"]
    assert [(p.reason, p.skill) for p in problems][:1] == [(ProblemReason.DIGEST_MISMATCH, "gamma")]


def test_unknown_schema_version_refuses_the_pack_and_its_skills(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "pk")
    assert lock(root).returncode == 0
    data = json.loads((root / PACK_JSON).read_text(encoding="utf-8"))
    data["schemaVersion"] = 2
    (root / PACK_JSON).write_text(json.dumps(data), encoding="utf-8")
    refused = load_pack(root)
    assert isinstance(refused, Problem) and refused.reason == ProblemReason.PACK_VERSION
    kept, problems = apply_packs([loaded(root, "alpha")], [root])
    assert kept == []
    assert {p.reason for p in problems} == {ProblemReason.PACK_VERSION}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"schemaVersion": 1, "name": "p", "version": "1", "skills": {}}',
        '{"schemaVersion": 1, "name": "", "version": "1", "skills": []}',
        '{"schemaVersion": 1, "name": "p", "version": "1", "skills": [{"name": "a", "path": "../a", '
        '"files": {"SKILL.md": "sha256:' + "0" * 64 + '"}}]}',
        '{"schemaVersion": 1, "name": "p", "version": "1", "skills": [{"name": "a", "path": "a", '
        '"files": {"SKILL.md": "md5:abc"}}]}',
        '{"schemaVersion": 1, "schemaVersion": 1, "name": "p", "version": "1", "skills": []}',
    ],
)
def test_malformed_pack_json_is_refused_as_pack_invalid(text: str) -> None:
    from skill_mcp.catalog.packs import PackError

    with pytest.raises(PackError) as info:
        parse_pack(text, Path("/x"))
    assert info.value.reason == ProblemReason.PACK_INVALID


@pytest.mark.parametrize("version", [None, 0, 2, "1", True])
def test_schema_versions_other_than_1_are_refused_as_pack_version(version: object) -> None:
    from skill_mcp.catalog.packs import PackError

    doc: dict[str, object] = {"name": "p", "version": "1", "skills": []}
    if version is not None:
        doc["schemaVersion"] = version
    with pytest.raises(PackError) as info:
        parse_pack(json.dumps(doc), Path("/x"))
    assert info.value.reason == ProblemReason.PACK_VERSION


def test_the_catalog_refuses_a_tampered_packed_skill(tmp_path: Path) -> None:
    """Through the real discovery (build_catalog), not just the module."""
    from skill_mcp.catalog import build_catalog
    from skill_mcp.config import load_settings

    root = make_pack(tmp_path / "pk")
    assert lock(root).returncode == 0
    (root / "alpha" / "SKILL.md").write_text("---\nname: alpha\ndescription: evil.\n---\nx\n", encoding="utf-8")
    catalog = build_catalog(load_settings([str(root)], {}))
    assert list(catalog.skills) == ["beta"] and catalog.skills["beta"].pack == "pk"
    assert any(p.reason == ProblemReason.DIGEST_MISMATCH and p.skill == "alpha" for p in catalog.problems)


def test_a_pack_json_nested_200000_deep_refuses_its_pack_and_nothing_else(tmp_path: Path) -> None:
    """Denied: a pack.json nested past the interpreter's recursion limit ending the catalog's build
    (the decoder recursed once per bracket, and ``RecursionError`` left every skill unserved). It
    refuses its own pack (``pack-invalid``), its skills with it; the neighbour outside is served."""
    from skill_mcp.catalog import build_catalog
    from skill_mcp.config import load_settings

    root = tmp_path / "skills"
    pack = make_pack(root / "pk")
    (pack / PACK_JSON).write_text('{"schemaVersion": ' + "[" * 200_000 + "]" * 200_000 + "}", encoding="utf-8")
    write(root / "ok" / "SKILL.md", "---\nname: ok\ndescription: The neighbour.\n---\n# ok\n")
    catalog = build_catalog(load_settings([str(root)], {"SKILL_MCP_CACHE": "off"}))
    assert sorted(catalog.skills) == ["ok"]
    invalid = [p for p in catalog.problems if p.reason is ProblemReason.PACK_INVALID]
    assert invalid and all(p.level is Level.ERROR for p in invalid)
    assert any("nests deeper than" in p.detail for p in invalid)
