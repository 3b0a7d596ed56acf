"""``skill_search`` through the real SDK client against the real server, in process and in both eras."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from skill_mcp.config import load_settings
from skill_mcp.server import build_server

pytestmark = pytest.mark.anyio
CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["legacy", "2026-07-28"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_skill_search_is_advertised_read_only_with_schemas(era: str) -> None:
    async with Client(build_server(load_settings([str(CORPUS)], {})), mode=era) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    tool = tools["skill_search"]
    assert tool.input_schema["properties"]["limit"]["maximum"] == 50
    assert tool.output_schema is not None
    assert tool.annotations is not None and tool.annotations.read_only_hint is True


async def test_skill_search_returns_ranked_hits_with_uri_score_and_reason(era: str) -> None:
    async with Client(build_server(load_settings([str(CORPUS)], {})), mode=era) as client:
        result = await client.call_tool("skill_search", {"query": "make an animated gif for slack", "limit": 3})
    assert not result.is_error
    data = result.structured_content
    assert data is not None and data["count"] == len(data["hits"]) <= 3 and data["searched"] == 18
    top = data["hits"][0]
    assert top["name"] == "slack-gif-creator" and top["uri"] == "skill://slack-gif-creator"
    assert top["description"].startswith("Make small animated GIFs")
    assert "slack" in top["matched"] and "name" in top["fields"] and top["reason"]
    scores = [h["score"] for h in data["hits"]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("args", [{"query": "pdf", "limit": 51}, {"query": "pdf", "limit": 0}, {"query": ""}, {}])
async def test_skill_search_refuses_bad_arguments_with_a_reason(args: dict[str, object]) -> None:
    async with Client(build_server(load_settings([str(CORPUS)], {})), mode="legacy") as client:
        result = await client.call_tool("skill_search", args)
    assert result.is_error
    assert result.structured_content is not None
    assert result.structured_content["reason"] == "invalid-arguments"


async def test_skill_search_with_no_match_is_an_empty_list_not_an_error() -> None:
    async with Client(build_server(load_settings([str(CORPUS)], {})), mode="legacy") as client:
        result = await client.call_tool("skill_search", {"query": "zzzqqq"})
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["hits"] == [] and result.structured_content["count"] == 0
