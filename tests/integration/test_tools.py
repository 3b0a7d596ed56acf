"""The read tools over stdio, through the SDK client, in both protocol eras."""

from __future__ import annotations

import base64
import json

import mcp_types as types
import pytest

from tests.helpers import embedded, text_of
from tests.integration.harness import ALPHA_FILES, BIG, PNG, Wire, handshake, sha256

pytestmark = [pytest.mark.slow, pytest.mark.anyio]  # slow: four shared servers (two transports, two eras)

SERVED = ["alpha", "beta", "bulk", "gamma"]


async def test_handshake_advertises_every_surface_and_the_skills_extension(wire: Wire) -> None:
    era = wire.era
    async with wire.session() as client:
        caps, instructions = await handshake(client, era)
        assert caps.tools is not None and caps.prompts is not None and caps.resources is not None
        assert caps.extensions == {"io.modelcontextprotocol/skills": {"directoryRead": True}}
        assert instructions is not None and "skill_list" in instructions
        assert "one skill at a time" in instructions


async def test_tools_list_has_the_read_tools_with_input_and_output_schemas(wire: Wire) -> None:
    async with wire.session() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"skill_list", "skill_load", "skill_file"} <= set(tools)
        for tool in (tools["skill_list"], tools["skill_load"], tools["skill_file"]):
            assert tool.input_schema["type"] == "object"
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            assert tool.annotations is not None and tool.annotations.read_only_hint is True


async def test_skill_list_pages_through_every_served_skill_and_reports_problems(wire: Wire) -> None:
    async with wire.session() as client:
        names: list[str] = []
        cursor = None
        pages = 0
        while True:
            args = {"limit": 1} | ({"cursor": cursor} if cursor else {})
            result = await client.call_tool("skill_list", args)
            assert not result.is_error
            page = result.structured_content
            assert page is not None
            if pages == 0:
                reasons = {p["reason"] for p in page["problems"]}
                assert "name-mismatch" in reasons and "frontmatter-parse" in reasons
                assert page["grantFrom"] == "declaration"
            else:
                assert "problems" not in page
            assert page["total"] == len(SERVED)
            names += [s["name"] for s in page["skills"]]
            pages += 1
            cursor = page.get("nextCursor")
            if not cursor:
                break
        assert names == SERVED and pages == len(SERVED)
        first = (await client.call_tool("skill_list", {})).structured_content
        alpha = first["skills"][0]
        assert alpha["uri"] == "skill://alpha/SKILL.md" and alpha["fileCount"] == 6
        assert [s["script"] for s in alpha["scripts"]] == ["scripts/hello.py"]
        gamma = next(s for s in first["skills"] if s["name"] == "gamma")
        assert gamma["skillsListExcluded"] == "name-mismatch"


async def test_skill_list_refuses_a_cursor_it_did_not_issue(wire: Wire) -> None:
    async with wire.session() as client:
        result = await client.call_tool("skill_list", {"cursor": "bm90LWEtY3Vyc29y"})
        assert result.is_error and result.structured_content["reason"] == "invalid-arguments"


async def test_skill_load_returns_instructions_frontmatter_and_a_manifest_with_true_digests(wire: Wire) -> None:
    skills_root = wire.root
    async with wire.session() as client:
        result = await client.call_tool("skill_load", {"name": "alpha"})
        assert not result.is_error
        out = result.structured_content
        assert out["frontmatter"]["metadata"] == {"author": "tests", "version": "1.0"}
        by_path = {f["path"]: f for f in out["files"]}
        assert set(by_path) == set(ALPHA_FILES)
        for rel, entry in by_path.items():
            assert entry["digest"] == sha256(skills_root / "alpha" / rel)
            assert entry["size"] == (skills_root / "alpha" / rel).stat().st_size
        assert by_path["SKILL.md"]["mimeType"] == "text/markdown"
        # SKILL.md verbatim, once, as a resource block; then the manifest the model reads, one a line.
        skill_md, manifest = result.content
        assert skill_md.type == "resource" and embedded(skill_md).uri == "skill://alpha/SKILL.md"
        assert text_of(skill_md) == (skills_root / "alpha" / "SKILL.md").read_text(encoding="utf-8")
        assert "# Alpha" not in json.dumps(out) and "instructions" not in out  # the text is not repeated
        assert text_of(manifest).startswith("# Skill alpha (skill://alpha/SKILL.md)")
        guide = by_path["references/guide.md"]
        assert f"- references/guide.md (text/markdown, {guide['size']} bytes)" in text_of(manifest)


async def test_skill_file_serves_a_mixed_batch_and_fails_only_the_bad_entries(wire: Wire) -> None:
    skills_root = wire.root
    paths = [
        "references/guide.md",
        "assets/logo.png",
        "../beta/SKILL.md",
        "references/missing.md",
        "references/big.txt",
        "references/deep/notes.txt",
    ]
    async with wire.session() as client:
        result = await client.call_tool("skill_file", {"name": "alpha", "paths": paths})
        assert not result.is_error
        out = result.structured_content
        assert [e["path"] for e in out["files"]] == paths
        guide, logo, escape, missing, big, notes = out["files"]
        assert guide["encoding"] == "utf-8" and guide["digest"] == sha256(skills_root / "alpha/references/guide.md")
        assert logo["encoding"] == "base64" and logo["mimeType"] == "image/png"
        assert logo["digest"] == sha256(skills_root / "alpha/assets/logo.png")
        assert escape["error"]["reason"] == "invalid-path"
        assert missing["error"]["reason"] == "not-found"
        assert big["error"]["reason"] == "file-too-large" and big["error"]["size"] == BIG
        assert notes["size"] == len("deep notes\n")
        # structuredContent is metadata; each file's body is in content once: text as a resource
        # block, the image as an image block the model can see.
        assert not [e for e in out["files"] if "text" in e or "blob" in e]
        summary, guide_block, image, notes_block = result.content
        assert "refused (invalid-path)" in text_of(summary) and "references/guide.md" in text_of(summary)
        assert text_of(guide_block) == "# Guide\n\nStep one.\n"
        assert embedded(guide_block).uri == "skill://alpha/references/guide.md"
        assert embedded(guide_block).mime_type == "text/markdown"
        assert isinstance(image, types.ImageContent) and base64.b64decode(image.data) == PNG
        assert text_of(notes_block) == "deep notes\n"
        assert (out["served"], out["failed"]) == (3, 3)


async def test_skill_file_refuses_a_batch_over_4_mib_whatever_the_order(wire: Wire) -> None:
    parts = [f"data/part{i}.txt" for i in range(5)]
    async with wire.session() as client:
        for order in (parts, list(reversed(parts))):
            result = await client.call_tool("skill_file", {"name": "bulk", "paths": order})
            assert result.is_error and result.structured_content["reason"] == "batch-too-large"
            assert result.structured_content["totalBytes"] == 5 * 900 * 1024
        # Positive control: four of them (3.6 MiB) fit under the cap and are served. Not over
        # handshake-era HTTP: its answers travel as one SSE event, and the SDK client refuses an
        # event over 1 MiB (DEFAULT_MAX_SSE_EVENT_SIZE) - a client limit, see docs/surfaces.md.
        if wire.transport == "stdio" or wire.era != "legacy":
            ok = await client.call_tool("skill_file", {"name": "bulk", "paths": parts[:4]})
            assert not ok.is_error and ok.structured_content["served"] == 4
            assert [embedded(b).uri for b in ok.content[1:]] == [f"skill://bulk/{p}" for p in parts[:4]]


async def test_skill_file_refuses_more_than_eight_paths(wire: Wire) -> None:
    async with wire.session() as client:
        result = await client.call_tool("skill_file", {"name": "alpha", "paths": ["SKILL.md"] * 9})
        assert result.is_error and result.structured_content["reason"] == "too-many-paths"
        ok = await client.call_tool("skill_file", {"name": "alpha", "paths": ["SKILL.md"] * 8})
        assert not ok.is_error and ok.structured_content["served"] == 8


async def test_refusals_are_tool_errors_with_a_stable_reason(wire: Wire) -> None:
    async with wire.session() as client:
        unknown = await client.call_tool("skill_load", {"name": "nope"})
        assert unknown.is_error and unknown.structured_content["reason"] == "unknown-skill"
        bad_args = await client.call_tool("skill_file", {"name": "alpha"})
        assert bad_args.is_error and bad_args.structured_content["reason"] == "invalid-arguments"
        broken = await client.call_tool("skill_load", {"name": "broken"})
        assert broken.is_error and broken.structured_content["reason"] == "unknown-skill"
        # The misnamed skill is still served by the tools, under its directory name.
        gamma = await client.call_tool("skill_load", {"name": "gamma"})
        assert not gamma.is_error and text_of(gamma.content[0]).endswith("Gamma body.\n")
