"""``validate --strict`` over the public skill collections reports only true problems.

Opt-in: set ``SKILL_MCP_PUBLIC_SKILLS`` to a directory holding unpacked copies of
anthropics/skills, obra/superpowers and openai/skills (as ``anthropics+skills``,
``obra+superpowers``, ``openai+skills``). Their text is never committed here. Each expected
finding below was read by a person and is a true problem by the collection's own authoring
guidance (a description that says when to use the skill, a SKILL.md under 500 lines) or by
how a client reads a skill through this server (nothing outside the skill can be followed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.helpers import as_json, run

BASE = os.environ.get("SKILL_MCP_PUBLIC_SKILLS")
pytestmark = pytest.mark.skipif(not BASE, reason="SKILL_MCP_PUBLIC_SKILLS is not set (opt-in corpus check)")

# collection -> (roots under it, the findings {(skill, reason, level)} validate --strict must report)
EXPECTED = {
    "anthropics+skills": (
        ["skills"],
        {
            ("claude-api", "spec-warning", "warning"),  # 1,068 characters; the format allows 1,024
            ("claude-api", "extension-excluded", "error"),  # so hosts refuse its entry: tools only
            ("claude-api", "floor-body-too-long", "error"),
            ("docx", "floor-body-too-long", "error"),
            ("webapp-testing", "floor-description-when", "error"),
        },
    ),
    "obra+superpowers": (
        ["skills"],
        {
            ("writing-skills", "floor-body-too-long", "error"),
            ("writing-skills", "floor-reference-outside-skill", "error"),  # twice: two sibling files
            ("subagent-driven-development", "floor-reference-outside-skill", "error"),
        },
    ),
    "openai+skills": (
        ["skills/.curated", "skills/.experimental", "skills/.system"],
        {
            ("gh-address-comments", "floor-description-when", "error"),
        },
    ),
}


@pytest.mark.parametrize("collection", sorted(EXPECTED))
def test_strict_validation_of_a_public_collection_reports_exactly_the_true_problems(collection: str) -> None:
    base = Path(str(BASE)) / collection
    subdirs, expected = EXPECTED[collection]
    done = run("validate", "--strict", "--json", *(str(base / d) for d in subdirs))
    report = as_json(done)
    found = {(p["skill"], p["reason"], p["level"]) for p in report["problems"]}
    assert found == expected, report["problems"]
    assert done.returncode == 1 and report["skills"] > 0
