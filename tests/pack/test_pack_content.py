"""The bundled pack: 51 skills in seven phases, each well-formed and served with no problem."""

from __future__ import annotations

import re
from collections import Counter

from skill_mcp.catalog import build_catalog
from skill_mcp.config import BUNDLED_ROOT, load_settings
from tests.pack.extract import PHASES, code_blocks, pack_text, parse_block, skill_dirs, split_skill_md

NAME = re.compile(r"^(?!.*--)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
STEP = re.compile(r"^\d+\. ", re.MULTILINE)
# Shapes of real credentials. Assembled from parts so this file does not match itself.
CREDENTIALS = [
    re.compile(p)
    for p in (
        "-----BEGIN [A-Z ]*PRIVATE KEY-----",
        "AKIA[0-9A-Z]{16}",
        "gh[pousr]_[A-Za-z0-9]{36,}",
        "xox[abprs]-[A-Za-z0-9-]{10,}",
        "sk-[A-Za-z0-9_-]{32,}",
        r"(?i)(?:api[_-]?key|secret|token|passw(?:or)?d)\s*[:=]\s*['\"][A-Za-z0-9/+_-]{16,}['\"]",
    )
]


def _skills() -> list[tuple[str, dict, str]]:
    out = []
    for d in skill_dirs():
        fm, body = split_skill_md((d / "SKILL.md").read_text(encoding="utf-8"))
        out.append((d.name, fm, body))
    return out


def test_the_pack_has_fifty_one_skills_in_the_seven_phases() -> None:
    skills = _skills()
    assert len(skills) == 51
    phases = Counter(fm["metadata"]["phase"] for _, fm, _ in skills)
    assert set(phases) == set(PHASES), phases
    assert min(phases.values()) >= 4, phases


def test_every_directory_name_is_a_skill_name_and_equals_the_frontmatter_name() -> None:
    for name, fm, _ in _skills():
        assert NAME.match(name), name
        assert fm["name"] == name


def test_every_description_says_what_it_does_and_when_to_use_it() -> None:
    for name, fm, _ in _skills():
        description = fm["description"]
        assert 120 <= len(description) <= 1024, (name, len(description))
        assert "Use when" in description, name
        assert not description.lower().startswith(("this skill", name)), name


def test_metadata_is_a_string_map_with_phase_and_tags() -> None:
    for name, fm, _ in _skills():
        meta = fm["metadata"]
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()), name
        assert set(meta) == {"phase", "tags"}, name
        assert len([t for t in meta["tags"].split(",") if t.strip()]) >= 3, name


def test_every_body_has_numbered_steps_and_stays_under_500_lines() -> None:
    for name, _, body in _skills():
        assert len(STEP.findall(body)) >= 4, name
        assert len((BUNDLED_ROOT / name / "SKILL.md").read_text(encoding="utf-8").splitlines()) < 500, name


def test_config_snippets_in_the_pack_are_valid_json_toml_and_yaml() -> None:
    seen: Counter[str] = Counter()
    for d in skill_dirs():
        _, body = split_skill_md((d / "SKILL.md").read_text(encoding="utf-8"))
        for lang, text in code_blocks(body):
            if lang in ("json", "toml", "yaml"):
                parse_block(lang, text)  # raises on a snippet a user could not paste
                seen[lang] += 1
    assert seen["json"] >= 10 and seen["toml"] >= 2 and seen["yaml"] >= 4, seen


def test_no_file_in_the_pack_holds_a_credential_like_string() -> None:
    hits = [(str(path), p.pattern) for path, text in pack_text().items() for p in CREDENTIALS if p.search(text)]
    assert hits == []


def test_the_credential_check_catches_a_planted_key() -> None:  # positive control
    planted = "AKI" + "A" + "Q" * 16 + "\n" + "api_key = '" + "x9" * 10 + "'"
    assert sum(bool(p.search(planted)) for p in CREDENTIALS) == 2


def test_the_server_with_no_skills_directory_serves_the_whole_pack_with_no_problem() -> None:
    settings = load_settings([], {})
    assert settings.roots_from == "bundled" and settings.roots == (BUNDLED_ROOT,)
    catalog = build_catalog(settings)
    assert [p.to_dict() for p in catalog.problems] == []
    assert sorted(catalog.skills) == [d.name for d in skill_dirs()]
    declared = {
        name: [r.interpreter for r in s.declaration.run]
        for name, s in catalog.skills.items()
        if s.declaration and s.declaration.run
    }
    assert sorted(i for v in declared.values() for i in v) == ["node", "python", "python", "python"], declared
    assert all(not s.missing_scripts for s in catalog.skills.values())


def test_docs_bundled_pack_lists_every_skill() -> None:
    doc = (BUNDLED_ROOT.parents[2] / "docs" / "bundled-pack.md").read_text(encoding="utf-8")
    missing = [d.name for d in skill_dirs() if f"`{d.name}`" not in doc]
    assert missing == []
