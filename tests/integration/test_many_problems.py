"""A root full of directories the catalog cannot serve answers a first page of bounded size.

Denied: a root of 2,000 directories without a SKILL.md (20,000 made a 5 MB answer) turning
``skill_list``'s first page, which lists the problems, into an answer no model context holds and
Streamable HTTP refuses (``answer-too-large``). The page lists ``MAX_PROBLEMS_LISTED`` of them,
the errors first, and counts them all (``problemCount``, ``problemsByReason``); ``skill-mcp
validate`` lists every one. The positive control: the neighbour is served on that page, and a
root with few problems still lists each one, in the scan's order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skill_mcp.surfaces.paging import MAX_PROBLEMS_LISTED
from tests.cli.helpers import as_json, run
from tests.integration.harness import in_process


def _root(tmp_path: Path, empty: int) -> Path:
    root = tmp_path / "skills"
    (root / "ok").mkdir(parents=True)
    (root / "ok" / "SKILL.md").write_text("---\nname: ok\ndescription: The neighbour.\n---\n# ok\n")
    (root / "zz-broken").mkdir()  # scanned last, an error among the warnings
    (root / "zz-broken" / "SKILL.md").write_text("---\nname: [\n---\n")
    for i in range(empty):
        (root / f"d{i:05d}").mkdir()
    return root


@pytest.mark.anyio
async def test_a_first_page_lists_at_most_the_bound_errors_first_and_counts_them_all(tmp_path: Path) -> None:
    root = _root(tmp_path, 2_000)
    async with in_process(root, "legacy", {"SKILL_MCP_CACHE": "off"}) as client:
        result = await client.call_tool("skill_list", {})
    out = result.structured_content
    assert out is not None
    assert [s["name"] for s in out["skills"]] == ["ok"]
    assert out["problemCount"] == 2_001
    assert out["problemsByReason"] == {"no-skill-md": 2_000, "frontmatter-parse": 1}
    listed = out["problems"]
    assert len(listed) == MAX_PROBLEMS_LISTED
    assert listed[0]["reason"] == "frontmatter-parse" and listed[0]["level"] == "error"  # errors first
    assert [p["path"] for p in listed[1:]] == [str(root / f"d{i:05d}") for i in range(MAX_PROBLEMS_LISTED - 1)]
    text = "".join(block.text for block in result.content if hasattr(block, "text"))
    assert "Problems (2001; the first 50 listed, errors first" in text
    assert "no-skill-md 2000, frontmatter-parse 1" in text
    assert len(text.encode()) < 16 * 1024
    report = as_json(run("validate", "--json", str(root)))
    assert len(report["problems"]) == 2_001  # every one, where an operator looks


@pytest.mark.anyio
async def test_a_root_with_few_problems_lists_each_in_the_scan_s_order(tmp_path: Path) -> None:
    root = _root(tmp_path, 3)
    async with in_process(root, "legacy", {"SKILL_MCP_CACHE": "off"}) as client:
        out = (await client.call_tool("skill_list", {})).structured_content
    assert out is not None
    assert [p["reason"] for p in out["problems"]] == ["no-skill-md"] * 3 + ["frontmatter-parse"]
    assert "problemsByReason" not in out
