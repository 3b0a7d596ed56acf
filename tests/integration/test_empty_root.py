"""A root that serves nothing is named among the server's problems, not taken for an empty catalog.

A collection kept in hidden folders (the way openai/skills keeps ``skills/.curated``) or a root
one level too high used to answer ``skill_list`` with ``total: 0, problems: []``: a client could
not tell it from an empty directory. The catalog now reports each such root as ``root-empty``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.harness import in_process

# What the catalog reports about a root is decided from Settings alone: the server is built in
# process and read through the SDK's in-memory client (no subprocess per case).
pytestmark = pytest.mark.anyio

SKILL = "---\nname: alpha\ndescription: Alpha writes reports. Use when a report is needed.\n---\n# Alpha\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def test_skill_list_names_a_root_whose_skills_sit_in_hidden_folders(tmp_path: Path, era: str) -> None:
    root = tmp_path / "collection"
    _write(root / "skills" / ".curated" / "alpha" / "SKILL.md", SKILL)
    _write(root / "README.md", "# A collection\n")
    async with in_process(root, era) as client:
        listed = (await client.call_tool("skill_list", {})).structured_content
    assert listed["total"] == 0
    (problem,) = listed["problems"]
    assert (problem["reason"], problem["level"], problem["path"]) == ("root-empty", "warning", str(root))
    assert "hidden directories are not searched" in problem["detail"]


async def test_a_root_that_serves_a_skill_has_no_root_empty_problem(tmp_path: Path, era: str) -> None:
    root = tmp_path / "collection"
    _write(root / "skills" / ".curated" / "alpha" / "SKILL.md", SKILL)
    async with in_process(root / "skills" / ".curated", era) as client:  # the root the problem's hint names
        listed = (await client.call_tool("skill_list", {})).structured_content
    assert listed["total"] == 1 and listed["problems"] == []
