"""A corpus shaped like a public skills repository is served whole, with no false problems."""

from __future__ import annotations

from pathlib import Path

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.reasons import ProblemReason

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "realworld"


def test_every_skill_is_served_and_only_true_problems_are_reported() -> None:
    catalog = build_catalog(load_settings([str(CORPUS)], {}))
    expected = sorted(p.name for p in (CORPUS / "skills").iterdir())
    assert len(expected) >= 15
    assert sorted(catalog.skills) == expected
    problems = [(p.reason, p.skill) for p in catalog.problems]
    # The one true problem: a 1,068-character description, served by the tools with a warning and
    # left out of the Skills extension, whose hosts refuse it.
    assert problems == [
        (ProblemReason.SPEC_WARNING, "algorithmic-art"),
        (ProblemReason.EXTENSION_EXCLUDED, "algorithmic-art"),
    ]
    assert len(catalog.skills["algorithmic-art"].description) == 1068


def test_block_scalar_descriptions_and_nested_reference_folders() -> None:
    catalog = build_catalog(load_settings([str(CORPUS)], {}))
    pdf = catalog.skills["pdf"]
    assert pdf.description.startswith("Extract text and tables") and "\nUse when" in pdf.description
    rels = [f.rel for f in pdf.files]
    assert "reference/forms/fillable.md" in rels and "scripts/fill_form.py" in rels
    assert (
        catalog.skills["docx"].description
        == "Create, edit and review Word documents, including tracked changes and comments."
    )
    assert catalog.skills["artifacts-builder"].frontmatter["metadata"] == {"author": "example", "version": "1.0"}
