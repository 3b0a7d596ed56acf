"""Real servers sharing one cache directory: never a stale answer, never a crash.

Two servers start at once on one tree and one ``SKILL_MCP_CACHE_DIR``, list every skill through
the SDK client, and must each give the answer a server without a cache gives; the tree changes
between rounds (edit, add, remove, rename), and the cache file is damaged once on purpose.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from skill_mcp.catalog.cache import CatalogCache
from tests.integration.harness import build_tree, connect, settle_clock

pytestmark = pytest.mark.slow  # every case starts a server or a CLI subprocess


async def _listing(root: Path, env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with connect(root, "legacy", env) as client:
        cursor: str | None = None
        while True:
            args: dict[str, Any] = {"limit": 200} if cursor is None else {"limit": 200, "cursor": cursor}
            page = (await client.call_tool("skill_list", args)).structured_content
            assert page is not None
            out.update({e["name"]: (e["description"], e["fileCount"]) for e in page["skills"]})
            if "problems" in page:
                out["problems"] = sorted((p["reason"], p["path"]) for p in page["problems"])
            cursor = page.get("nextCursor")
            if not cursor:
                return out


async def _two_at_once(root: Path, cache_env: dict[str, str]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = [{}, {}]

    async def one(i: int) -> None:
        results[i] = await _listing(root, cache_env)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, 0)
        tg.start_soon(one, 1)
    return results


@pytest.mark.anyio
async def test_two_servers_sharing_a_cache_never_answer_stale(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "skills")
    cache_env = {"SKILL_MCP_CACHE_DIR": str(tmp_path / "cache")}
    no_cache = {"SKILL_MCP_CACHE": "off"}

    def edit() -> None:
        (root / "beta" / "SKILL.md").write_text("---\nname: beta\ndescription: Beta v2.\n---\nv2\n", encoding="utf-8")

    def add() -> None:
        (root / "delta").mkdir()
        (root / "delta" / "SKILL.md").write_text("---\nname: delta\ndescription: Delta.\n---\n", encoding="utf-8")

    def rename() -> None:
        (root / "delta").rename(root / "epsilon")

    def remove() -> None:
        shutil.rmtree(root / "gamma")

    def corrupt() -> None:
        for path in (tmp_path / "cache").iterdir():
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0xFF
            path.write_bytes(bytes(data))

    for change in (None, None, edit, add, rename, remove, corrupt):
        if change is not None:
            change()
        settle_clock(root)
        expected = await _listing(root, no_cache)
        got = await _two_at_once(root, cache_env)
        assert got == [expected, expected], change
    cache_files = [p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]
    assert len(cache_files) == 1 and cache_files[0].stat().st_size > 0
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.endswith(".tmp")]
    # Positive control: the servers did write entries they could serve again (after the
    # corruption the last round rewrote the file).
    reader = CatalogCache(cache_files[0], now_ns=lambda _d: None)
    assert reader.held >= 4
    reader.close()
