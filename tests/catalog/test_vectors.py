"""Each vector is a SKILL.md with its expected outcome, kept as data beside this file (the table and
its check: ``vector_table.py``), here under the loader the server uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.reasons import ProblemReason
from tests.catalog.vector_table import EXPECTED, check_vector


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vector_outcome_and_reasons(name: str, tmp_path: Path) -> None:
    check_vector(name, tmp_path)


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
        "---\nname: keeps\ndescription: still served\nmcp-host:\n  version: 1\n  run: [\nlicense: MIT\n---\n# Body\n"
    )
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    skill = catalog.skills["keeps"]
    assert skill.declaration is None
    assert skill.frontmatter["license"] == "MIT"
    (problem,) = [p for p in catalog.problems if p.reason is ProblemReason.DECLARATION_INVALID]
    assert "line" in problem.detail
