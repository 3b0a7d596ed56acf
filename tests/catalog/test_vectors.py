"""Each vector is a SKILL.md with its expected outcome, kept as data beside this file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.reasons import ProblemReason

VECTORS = Path(__file__).parent / "vectors"
EXPECTED: dict[str, dict] = json.loads((VECTORS / "expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vector_outcome_and_reasons(name: str, tmp_path: Path) -> None:
    expected = EXPECTED[name]
    skill_dir = tmp_path / name
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_bytes((VECTORS / f"{name}.md").read_bytes())
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    reasons = sorted({p.reason.value for p in catalog.problems})
    assert reasons == expected["reasons"], [p.to_dict() for p in catalog.problems]
    # Which rule keeps the skill out of the Skills extension (none: it is published).
    assert sorted(p.rule for p in catalog.problems if p.rule) == expected.get("extensionRules", [])
    if expected["outcome"] == "refused":
        assert name not in catalog.skills
        return
    skill = catalog.skills[name]
    for key, value in expected.get("frontmatter", {}).items():
        assert skill.frontmatter[key] == value
    if {"declaration-invalid", "declaration-version"} & set(expected["reasons"]):
        assert skill.declaration is None
    if "scripts" in expected:
        assert skill.declaration is not None
        rows = [{"script": r.script, "interpreter": r.interpreter, "env": list(r.env), "timeout": r.timeout}
                for r in skill.declaration.run]
        assert rows == expected["scripts"]


def test_frontmatter_parse_errors_carry_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text("---\nname: broken\ndescription: ok\nlicense: [x\n---\n")
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    (problem,) = catalog.problems
    assert problem.reason is ProblemReason.FRONTMATTER_PARSE
    assert "line 5" in problem.detail and "column" in problem.detail


def test_broken_declaration_reports_position_and_keeps_instructions(tmp_path: Path) -> None:
    (tmp_path / "keeps").mkdir()
    (tmp_path / "keeps" / "SKILL.md").write_text(
        "---\nname: keeps\ndescription: still served\nmcp-host:\n  version: 1\n  run: [\nlicense: MIT\n---\n# Body\n")
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    skill = catalog.skills["keeps"]
    assert skill.declaration is None
    assert skill.frontmatter["license"] == "MIT"
    (problem,) = [p for p in catalog.problems if p.reason is ProblemReason.DECLARATION_INVALID]
    assert "line" in problem.detail
