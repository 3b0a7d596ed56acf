"""The two-phase first build: an answer before the bodies are in says so, and the complete
index ranks exactly as the one-phase build.

``SearchState(two_phase_from=0)`` puts the labelled corpus (67 skills, below the default
threshold) through the two phases; the server test uses a generated tree above the default
threshold, through the real SDK client. The background build is the real one, in its real
thread: a test waits for it (``wait_complete``), it never fakes it.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.search import index_catalog, search_result, short_index
from skill_mcp.search.store import HEADER_BYTES, index_file
from skill_mcp.server import build_server
from skill_mcp.surfaces.search_tool import OUTPUT_SCHEMA, TWO_PHASE_FROM, SearchState
from tests.cli.helpers import as_json, run
from tests.helpers import text_of
from tests.search.quality import labelled

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
ROWS = labelled(HERE / "queries.tsv")
# Queries whose best hit is decided by a body or a heading once the bodies are in.
BODY_WORDS = ("kebab", "quokka")


def _catalog(root: Path) -> Catalog:
    return build_catalog(load_settings([str(root)], {"SKILL_MCP_CACHE": "off"}))


async def _answers(state: SearchState, catalog: Catalog, queries: list[str]) -> list[dict[str, Any]]:
    return [await state.answer(catalog, q, 10) for q in queries]


async def test_the_first_answer_is_partial_and_after_the_bodies_ranks_as_one_phase() -> None:
    catalog = _catalog(CORPUS)
    queries = [q for q, _ in ROWS]
    state = SearchState(two_phase_from=0)
    first = await state.answer(catalog, queries[0], 10)
    assert first["coverage"] == "partial"
    # What the partial answer searched: names, descriptions and tags, never a body or heading.
    short = short_index(catalog)
    assert first == search_result(catalog, short, queries[0], 10, complete=False)
    assert state.wait_complete(60)
    after = await _answers(state, catalog, queries)
    one_phase = index_catalog(catalog)
    assert after == [search_result(catalog, one_phase, q, 10) for q in queries]
    assert all(a["coverage"] == "complete" for a in after)
    # Positive control: the two phases differ, so the comparison above could fail.
    assert any("body" in h["fields"] or "heading" in h["fields"] for a in after for h in a["hits"])
    partial = [search_result(catalog, short, q, 10, complete=False) for q in queries]
    assert all("body" not in h["fields"] and "heading" not in h["fields"] for a in partial for h in a["hits"])


async def test_a_small_catalog_is_indexed_whole_at_once() -> None:
    catalog = _catalog(CORPUS)
    assert len(catalog.skills) < TWO_PHASE_FROM
    state = SearchState()
    first = await state.answer(catalog, "fill in a pdf form", 3)
    assert first["coverage"] == "complete" and first == search_result(
        catalog, index_catalog(catalog), "fill in a pdf form", 3
    )


def _big_tree(root: Path, n: int = TWO_PHASE_FROM + 2) -> Path:
    """``n`` skills; one of them says ``kebab`` in a heading and ``quokka`` in its body only."""
    for i in range(n):
        name = f"skill-{i:04d}"
        body = f"# {name}\n\nGeneral notes about tool {i}.\n"
        if i == 7:
            body += "## Kebab sizes\n\nThe quokka jumps.\n"
        path = root / name / "SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text(
            f"---\nname: {name}\ndescription: Tool number {i} for everyday work.\n---\n{body}", encoding="utf-8"
        )
    return root


async def _until_complete(client: Client, args: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every answer up to the first complete one: (the partial ones, the complete one)."""
    partial: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        while True:
            result = await client.call_tool("skill_search", args)
            assert not result.is_error and result.structured_content is not None
            if result.structured_content["coverage"] == "complete":
                return partial, result.structured_content
            partial.append(result.structured_content)
            assert "still being indexed" in text_of(result.content[0])
            await anyio.sleep(0.02)


async def test_the_server_answers_first_from_short_fields_then_completes_and_persists(tmp_path: Path) -> None:
    root = _big_tree(tmp_path / "skills")
    time.sleep(0.2)  # older than the racy margin: the complete index may be persisted
    settings = load_settings([str(root)], {"SKILL_MCP_CACHE_DIR": str(tmp_path / "c")})
    args = {"query": "kebab quokka", "limit": 3}
    async with Client(build_server(settings), mode="legacy") as client:
        partial, complete = await _until_complete(client, args)
    assert partial, "the first answer came before the bodies were in"
    assert partial[0]["hits"] == [] and partial[0]["match"] == "none"  # the words are in a body only
    assert complete["hits"][0]["name"] == "skill-0007" and complete["hits"][0]["section"] == "Kebab sizes"
    cli = await anyio.to_thread.run_sync(
        lambda: run(
            "search",
            "kebab",
            "quokka",
            "--limit",
            "3",
            "--json",
            "--skills-dir",
            str(root),
            env={"SKILL_MCP_CACHE": "off"},
        )
    )
    assert complete == as_json(cli)  # the one-phase build's answer, to the bit
    assert index_file(tmp_path / "c", _catalog(root).roots).is_file()
    async with Client(build_server(settings), mode="legacy") as client:  # warm: the persisted whole index
        warm = (await client.call_tool("skill_search", args)).structured_content
    assert warm == complete


async def test_a_damaged_persisted_index_is_rebuilt_in_two_phases_and_never_served(tmp_path: Path) -> None:
    root = _big_tree(tmp_path / "skills")
    time.sleep(0.2)
    catalog = _catalog(root)
    index_catalog(catalog, tmp_path / "c")
    path = index_file(tmp_path / "c", catalog.roots)
    data = bytearray(path.read_bytes())
    end = json.loads(data[:HEADER_BYTES])["names"][0]  # the postings come first
    data[HEADER_BYTES:end] = bytes(b ^ 0x01 for b in data[HEADER_BYTES:end])
    path.write_bytes(bytes(data))
    state = SearchState(tmp_path / "c")
    first = await state.answer(catalog, "kebab quokka", 3)  # opened, then its postings fail their checksum
    assert first["coverage"] == "partial"
    assert state.wait_complete(60)
    after = await state.answer(catalog, "kebab quokka", 3)
    assert after == search_result(catalog, index_catalog(catalog), "kebab quokka", 3)
    assert after["hits"][0]["name"] == "skill-0007"
    warm = SearchState(tmp_path / "c")  # the damaged file was replaced by a good one
    assert await warm.answer(catalog, "kebab quokka", 3) == after


async def test_a_replaced_catalog_abandons_the_old_background_build(tmp_path: Path) -> None:
    old = _catalog(_big_tree(tmp_path / "old", 400))
    new = _catalog(_big_tree(tmp_path / "new"))
    state = SearchState(two_phase_from=0)
    assert (await state.answer(old, "kebab", 3))["coverage"] == "partial"
    assert (await state.answer(new, "kebab", 3))["coverage"] == "partial"  # a --watch reload, say
    assert state.wait_complete(60)
    built = state.built_for(new)
    assert built is not None and built[1] is True
    assert state.built_for(old) is None  # the old build, finished or abandoned, never came back
    assert await state.answer(new, "kebab", 3) == search_result(new, index_catalog(new), "kebab", 3)


def test_two_servers_building_in_two_phases_share_one_cache_directory(tmp_path: Path) -> None:
    root = _big_tree(tmp_path / "skills")
    time.sleep(0.2)
    catalogs = [_catalog(root) for _ in range(3)]
    states = [SearchState(tmp_path / "c") for _ in catalogs]
    done: list[dict[str, Any]] = []

    def one(state: SearchState, catalog: Catalog) -> None:
        anyio.run(state.answer, catalog, "kebab quokka", 3)
        assert state.wait_complete(60)
        done.append(anyio.run(state.answer, catalog, "kebab quokka", 3))

    threads = [threading.Thread(target=one, args=pair) for pair in zip(states, catalogs, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    expected = search_result(catalogs[0], index_catalog(catalogs[0]), "kebab quokka", 3)
    assert done == [expected] * 3
    warm = SearchState(tmp_path / "c")
    assert anyio.run(warm.answer, catalogs[0], "kebab quokka", 3) == expected
    assert warm.built_for(catalogs[0]) is not None and not isinstance(warm.built_for(catalogs[0])[0].postings, dict)  # type: ignore[index]  # read from the file
    assert not [p for p in (tmp_path / "c").iterdir() if p.name.endswith(".tmp")]


def test_coverage_is_in_the_strict_output_schema() -> None:
    assert OUTPUT_SCHEMA["properties"]["coverage"]["enum"] == ["complete", "partial"]
    assert "coverage" in OUTPUT_SCHEMA["required"]
