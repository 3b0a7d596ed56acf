"""Prompts, skill:// resources and the MCP Skills extension over stdio, in both eras."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.helpers import blob_of, text_of
from tests.integration.harness import ALPHA_FILES, PNG, Connect, Wire, directory_read, sha256, skills_get, skills_list

pytestmark = [
    pytest.mark.slow,
    pytest.mark.anyio,
]  # slow: four shared servers (two transports, two eras) and one per case beside them

INVALID_PARAMS = -32602
ERA_FIELDS = ("resultType", "ttlMs", "cacheScope")


def assert_era_fields(result: dict, era: str, *, cacheable: bool = True) -> None:
    """2026-07-28 results carry ``resultType`` (and cacheable ones ``ttlMs``, ``cacheScope``); the
    handshake-era schemas define none of the three, so such a result carries none."""
    if era == "legacy":
        assert [f for f in ERA_FIELDS if f in result] == []
        return
    assert result["resultType"] == "complete"
    if cacheable:
        assert isinstance(result["ttlMs"], int) and result["cacheScope"] in ("public", "private")
    else:
        assert "ttlMs" not in result and "cacheScope" not in result


async def test_prompts_are_one_per_served_skill_with_the_body_as_message(wire: Wire) -> None:
    async with wire.session() as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert sorted(prompts) == ["alpha", "beta", "bulk", "gamma"]
        assert prompts["beta"].description == "Beta answers questions."
        got = await client.get_prompt("beta")
        assert [m.role for m in got.messages] == ["user"]
        assert text_of(got.messages[0].content) == "Beta body.\n"
        with pytest.raises(MCPError) as err:
            await client.get_prompt("nope")
        assert err.value.code == INVALID_PARAMS


async def test_resources_list_every_file_of_the_published_skills_across_pages(wire: Wire) -> None:
    async with wire.session() as client:
        uris: list[str] = []
        cursor = None
        while True:
            page = await client.list_resources(cursor=cursor)
            uris += [r.uri for r in page.resources]
            if page.resources and page.resources[0].uri == "skill://alpha/SKILL.md":
                first = page.resources[0]
                assert (first.name, first.description, first.mime_type) == (
                    "alpha",
                    "Alpha turns notes into reports.",
                    "text/markdown",
                )
            cursor = page.next_cursor
            if not cursor:
                break
        expected = {f"skill://alpha/{p}" for p in ALPHA_FILES}
        expected |= {"skill://beta/SKILL.md", "skill://bulk/SKILL.md"}
        expected |= {f"skill://bulk/data/part{i}.txt" for i in range(5)}
        assert len(uris) == len(set(uris))
        # gamma's frontmatter name disagrees with its directory: not published as resources.
        assert set(uris) == expected


async def test_resources_read_serves_text_and_blobs_and_refuses_unknown_uris(wire: Wire) -> None:
    skills_root = wire.root
    async with wire.session() as client:
        skill_md = (await client.read_resource("skill://alpha/SKILL.md")).contents[0]
        assert skill_md.mime_type == "text/markdown"
        assert text_of(skill_md) == (skills_root / "alpha" / "SKILL.md").read_text(encoding="utf-8")
        logo = (await client.read_resource("skill://alpha/assets/logo.png")).contents[0]
        assert logo.mime_type == "image/png" and base64.b64decode(blob_of(logo)) == PNG
        # Read by URI even though not listed: the tools serve gamma, so its URIs read too.
        gamma = (await client.read_resource("skill://gamma/SKILL.md")).contents[0]
        assert text_of(gamma).endswith("Gamma body.\n")
        for uri in (
            "skill://nope/SKILL.md",
            "skill://alpha/nope.md",
            "skill://alpha",
            "skill://alpha/../beta/SKILL.md",
            "file:///etc/passwd",
            "skill://alpha/references/%2E%2E/SKILL.md",
        ):
            with pytest.raises(MCPError) as err:
                await client.read_resource(uri)
            assert err.value.code == INVALID_PARAMS, uri


async def test_skills_list_publishes_complete_entries_with_digests(wire: Wire) -> None:
    skills_root = wire.root
    async with wire.session() as client:
        result = await skills_list(client)
        assert_era_fields(result, wire.era)
        entries = {e["uri"]: e for e in result["skills"]}
        assert list(entries) == ["skill://alpha/SKILL.md", "skill://beta/SKILL.md", "skill://bulk/SKILL.md"]
        alpha = entries["skill://alpha/SKILL.md"]
        assert alpha["frontmatter"]["name"] == "alpha" and alpha["frontmatter"]["license"] == "MIT"
        files = {r["uri"]: r for r in alpha["resources"]}
        assert "skill://alpha/SKILL.md" in files and len(files) == 6
        for uri, res in files.items():
            path = skills_root / "alpha" / uri.removeprefix("skill://alpha/")
            assert res["digest"] == sha256(path) and res["size"] == path.stat().st_size


async def test_skills_entry_frontmatter_is_verbatim_including_mcp_host(wire: Wire) -> None:
    async with wire.session() as client:
        alpha = (await skills_get(client, "skill://alpha/SKILL.md"))["skill"]
        assert alpha["frontmatter"]["mcp-host"]["run"][0]["script"] == "scripts/hello.py"


async def test_skills_get_answers_for_a_served_skill_and_32602_otherwise(wire: Wire) -> None:
    async with wire.session() as client:
        got = await skills_get(client, "skill://beta/SKILL.md")
        assert "nextCursor" not in got
        assert_era_fields(got, wire.era)
        assert got["skill"]["uri"] == "skill://beta/SKILL.md"
        assert got["skill"]["frontmatter"] == {"name": "beta", "description": "Beta answers questions."}
        for uri in ("skill://nope/SKILL.md", "skill://beta", "skill://beta/other.md", "skill://gamma/SKILL.md"):
            with pytest.raises(MCPError) as err:
                await skills_get(client, uri)
            assert err.value.code == INVALID_PARAMS, uri


async def test_directory_read_lists_direct_children_and_refuses_files(wire: Wire) -> None:
    async with wire.session() as client:
        root = await directory_read(client, "skill://alpha")
        assert_era_fields(root, wire.era, cacheable=False)
        kids = {r["uri"]: r.get("mimeType") for r in root["resources"]}
        assert kids == {
            "skill://alpha/assets": "inode/directory",
            "skill://alpha/references": "inode/directory",
            "skill://alpha/scripts": "inode/directory",
            "skill://alpha/SKILL.md": "text/markdown",
        }
        refs = await directory_read(client, "skill://alpha/references")
        assert {r["uri"] for r in refs["resources"]} == {
            "skill://alpha/references/deep",
            "skill://alpha/references/big.txt",
            "skill://alpha/references/guide.md",
        }
        for uri in ("skill://alpha/SKILL.md", "skill://alpha/nope", "skill://nope"):
            with pytest.raises(MCPError) as err:
                await directory_read(client, uri)
            assert err.value.code == INVALID_PARAMS, uri


async def test_directory_read_takes_a_trailing_slash_as_the_same_directory(wire: Wire) -> None:
    async with wire.session() as client:
        for canonical in ("skill://alpha/scripts", "skill://alpha/references/deep", "skill://alpha"):
            slashed = await directory_read(client, canonical + "/")
            assert slashed == await directory_read(client, canonical), canonical
            assert slashed["resources"], canonical
        # The children keep their canonical URIs (no slash), and a file is still not a directory.
        assert {r["uri"] for r in (await directory_read(client, "skill://alpha/scripts/"))["resources"]} == {
            "skill://alpha/scripts/hello.py"
        }
        for uri in ("skill://alpha/SKILL.md/", "skill://alpha/scripts//", "skill://alpha/nope/", "skill://nope/"):
            with pytest.raises(MCPError) as err:
                await directory_read(client, uri)
            assert err.value.code == INVALID_PARAMS, uri


async def test_cacheable_results_carry_ttl_and_scope_in_the_2026_era(connect: Connect, skills_root: Path) -> None:
    async with connect(skills_root, "2026-07-28") as client:
        results = [
            await client.list_tools(),
            await client.list_prompts(),
            await client.list_resources(),
            await client.list_resource_templates(),
            await client.read_resource("skill://beta/SKILL.md"),
        ]
        for result in results:  # the 2026-07-28 results: each carries the cache fields
            assert getattr(result, "ttl_ms", None) == 60_000, type(result).__name__
            assert getattr(result, "cache_scope", None) == "public", type(result).__name__
        assert (await client.list_resource_templates()).resource_templates == []
