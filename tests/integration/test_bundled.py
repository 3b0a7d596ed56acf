"""`skill-mcp serve` with no arguments serves the bundled pack to the SDK's own client."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.helpers import text_of
from tests.integration.harness import skills_list
from tests.serve import stdio_params

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_serve_without_arguments_serves_the_bundled_skills(era: str) -> None:
    # No --skills-dir, and the SDK's default environment carries no SKILLS_DIR: the bundled pack.
    params = stdio_params()
    async with Client(params, mode=era, read_timeout_seconds=60) as client:
        listed = (await client.call_tool("skill_list", {"limit": 200})).structured_content
        assert listed["total"] >= 2 and len(listed["skills"]) == listed["total"]
        assert [p for p in listed["problems"] if p["level"] == "error"] == []
        first = listed["skills"][0]["name"]
        loaded = await client.call_tool("skill_load", {"name": first})
        assert not loaded.is_error and text_of(loaded.content[0]).strip()
        assert (await skills_list(client))["skills"]


async def test_a_remembered_name_that_is_not_served_is_refused_with_the_closest_served_names() -> None:
    # The skillmcp notes call this skill 'stdout-purity-check'; the pack serves it as check-stdout-purity.
    params = stdio_params()
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        refused = await client.call_tool("skill_load", {"name": "stdout-purity-check"})
        assert refused.is_error and refused.structured_content["reason"] == "unknown-skill"
        assert refused.structured_content["closest"][0] == "check-stdout-purity"
        nothing_alike = await client.call_tool("skill_load", {"name": "nope"})
        assert nothing_alike.structured_content["reason"] == "unknown-skill"
        assert nothing_alike.structured_content["closest"] == []
