"""Answers sized for a model's context: a file's text once per answer, a default page under 16 KB.

Counted as a client that hands the model everything it got would count it: the JSON of every
content block plus the JSON of ``structuredContent``. Before, ``skill_file`` and ``skill_load``
carried each body in both (an 11.8 KB file cost about twice that and more), and a default
``skill_list`` page of skills with long descriptions was 19 KB and could reach 50 KB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import Connect

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

PAGE_LIMIT = 16 * 1024
DESCRIPTION = (
    "Use when the task needs a long description. " * 22
)  # about 1,000 characters, the Agent Skills specification's cap


def _cost(result: Any) -> int:
    content = sum(len(block.model_dump_json(by_alias=True, exclude_none=True).encode()) for block in result.content)
    return content + len(json.dumps(result.structured_content, ensure_ascii=False).encode())


def _tree(root: Path, skills: int, body: str = "# Steps\n\nDo it.\n") -> Path:
    for i in range(skills):
        skill = root / f"skill-{i:03d}"
        (skill / "references").mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: skill-{i:03d}\ndescription: {DESCRIPTION.strip()}\n---\n{body}", encoding="utf-8"
        )
        (skill / "references" / "guide.md").write_text(
            'A line of the guide, with "quotes".\n' * 320, encoding="utf-8"
        )  # 11.8 KB
    return root


async def test_a_file_costs_its_size_once_not_twice(connect: Connect, tmp_path: Path) -> None:
    root = _tree(tmp_path / "skills", 1, body="# Steps\n\n" + 'Step with "quotes" and a \\ path.\n' * 360)
    guide = (root / "skill-000" / "references" / "guide.md").stat().st_size
    skill_md = (root / "skill-000" / "SKILL.md").stat().st_size
    assert guide > 11_000 and skill_md > 11_000
    async with connect(root, "legacy") as client:
        read = await client.call_tool("skill_file", {"name": "skill-000", "paths": ["references/guide.md"]})
        loaded = await client.call_tool("skill_load", {"name": "skill-000"})
    assert not read.is_error and not loaded.is_error
    # One copy of the text (JSON escapes a quote as two bytes) plus a few hundred bytes of metadata.
    assert _cost(read) < 1.15 * guide + 1024, _cost(read)
    # skill_load's metadata repeats the description (``description`` and the verbatim
    # ``frontmatter`` the Skills extension's entry shape also carries): small beside the body.
    assert _cost(loaded) < 1.15 * skill_md + 2 * len(DESCRIPTION) + 1024, _cost(loaded)


async def test_a_default_skill_list_page_stays_under_16_kb_and_the_pages_cover_every_skill(
    connect: Connect, tmp_path: Path
) -> None:
    root = _tree(tmp_path / "skills", 60)
    async with connect(root, "legacy") as client:
        first = await client.call_tool("skill_list", {})
        pages, seen = [first], [s["name"] for s in first.structured_content["skills"]]
        while "nextCursor" in pages[-1].structured_content:
            pages.append(await client.call_tool("skill_list", {"cursor": pages[-1].structured_content["nextCursor"]}))
            seen += [s["name"] for s in pages[-1].structured_content["skills"]]
        asked = await client.call_tool("skill_list", {"limit": 25})
    assert [_cost(p) for p in pages if _cost(p) >= PAGE_LIMIT] == []
    assert seen == [f"skill-{i:03d}" for i in range(60)]  # every skill once, in order
    assert 5 <= len(first.structured_content["skills"]) < 25  # the budget, not the count, cut the page
    # An explicit limit is honoured as asked (the caller chose the size).
    assert len(asked.structured_content["skills"]) == 25 and _cost(asked) > PAGE_LIMIT
