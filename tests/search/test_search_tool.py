"""``skill_search`` through the real SDK client against the real server, in process and in both eras."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from skill_mcp.config import load_settings
from skill_mcp.server import build_server
from tests.helpers import text_of

pytestmark = pytest.mark.anyio
CORPUS = Path(__file__).parent / "corpus"


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
    assert data is not None and data["count"] == len(data["hits"]) <= 3 and data["searched"] == 67
    top = data["hits"][0]
    assert top["name"] == "slack-gif-creator" and top["uri"] == "skill://slack-gif-creator/SKILL.md"
    assert data["match"] == "good" and 0.3 <= top["confidence"] <= 1
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


async def test_a_hits_uri_reads_through_the_sdk_client_as_the_skills_skill_md(era: str) -> None:
    async with Client(build_server(load_settings([str(CORPUS)], {})), mode=era) as client:
        result = await client.call_tool("skill_search", {"query": "fill in a pdf form", "limit": 3})
        assert result.structured_content is not None
        hits = result.structured_content["hits"]
        loaded = await client.call_tool("skill_load", {"name": hits[0]["name"]})
        assert loaded.structured_content is not None
        for hit in hits:  # every hit's URI is one a client can read, the one skill_load gives
            read = await client.read_resource(hit["uri"])
            assert read.contents[0].uri == hit["uri"] and text_of(read.contents[0]).startswith("---")
    assert hits[0]["name"] == "pdf" and hits[0]["uri"] == loaded.structured_content["uri"]


async def test_a_query_nothing_fits_is_reported_as_a_weak_match_with_low_confidence() -> None:
    async with Client(build_server(load_settings([str(CORPUS)], {})), mode="legacy") as client:
        off = await client.call_tool("skill_search", {"query": "who won the football match", "limit": 3})
        on = await client.call_tool("skill_search", {"query": "who can merge these pdf files", "limit": 3})
    assert off.structured_content is not None and on.structured_content is not None
    assert off.structured_content["hits"], "the closest skills are still listed"
    assert off.structured_content["match"] == "weak"  # positive control below: a real query is "good"
    assert all(h["confidence"] < 0.3 for h in off.structured_content["hits"])
    assert "closest" in text_of(off.content[0])
    assert on.structured_content["match"] == "good" and on.structured_content["hits"][0]["name"] == "pdf"


@pytest.mark.slow
@pytest.mark.parametrize(
    "query", ["my test keeps failing and I don't know why", "carry out the plan we wrote", "who won the football match"]
)
async def test_the_cli_search_gives_the_tools_answer(query: str) -> None:
    from tests.cli.helpers import as_json, run

    async with Client(build_server(load_settings([str(CORPUS)], {})), mode="legacy") as client:
        tool = await client.call_tool("skill_search", {"query": query, "limit": 10})
    cli = await anyio.to_thread.run_sync(lambda: run("search", *query.split(), "--json", "--skills-dir", str(CORPUS)))
    assert tool.structured_content == as_json(cli)  # same hits, order, scores, confidence, reasons, match
