"""A corpus shaped like a public skills repository, served end to end over stdio."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import text_of
from tests.integration.harness import Connect, directory_read, sha256, skills_list

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "realworld" / "skills"


async def test_every_skill_of_a_realistic_corpus_is_listed_loadable_and_published(connect: Connect, era: str) -> None:
    on_disk = sorted(p.parent.name for p in CORPUS.glob("*/SKILL.md"))
    assert len(on_disk) >= 15
    async with connect(CORPUS, era) as client:
        listed = (await client.call_tool("skill_list", {"limit": 200})).structured_content
        assert [s["name"] for s in listed["skills"]] == on_disk
        # One skill is served by the tools only: its 1,068-character description breaks the
        # Agent Skills format, and hosts refuse such an entry.
        errors = [(p["reason"], p["skill"], p.get("rule")) for p in listed["problems"] if p["level"] == "error"]
        assert errors == [("extension-excluded", "algorithmic-art", "description-too-long")]
        published = [n for n in on_disk if n != "algorithmic-art"]
        entries = []
        cursor = None
        while True:
            page = await skills_list(client, cursor)
            entries += page["skills"]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        assert [e["frontmatter"]["name"] for e in entries] == published
        for entry in entries:
            name = entry["frontmatter"]["name"]
            assert entry["uri"] == f"skill://{name}/SKILL.md"
            for res in entry["resources"]:
                path = CORPUS / name / res["uri"].removeprefix(f"skill://{name}/")
                assert res["size"] == path.stat().st_size and res["digest"] == sha256(path)
            root = await directory_read(client, f"skill://{name}")
            assert f"skill://{name}/SKILL.md" in {r["uri"] for r in root["resources"]}
        for name in on_disk:
            loaded = await client.call_tool("skill_load", {"name": name})
            assert not loaded.is_error and text_of(loaded.content[0]).strip()
