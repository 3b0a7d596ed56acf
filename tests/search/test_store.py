"""The persisted search index is never wrong: a warm start ranks exactly as a fresh build.

Each test changes the skills the way a person does (a description, a body, a same-size rewrite
with the mtime put back, a skill added, removed or renamed) or damages the file, then checks
that the index served equals a fresh build of the same tree, and that the persisted index was
actually read when nothing changed (the positive control).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mcp import Client

from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.search import SearchIndex, StoredIndexError, index_catalog, search_result
from skill_mcp.search.store import HEADER_BYTES, index_file
from skill_mcp.server import build_server
from tests.cli.helpers import run

FAR_FUTURE_NS = 2**62  # an injected clock for which nothing on disk is recent
QUERIES = (
    "rotate a pdf page",
    "resize images for the web",
    "write release notes",
    "quarterly budget numbers",
    "zebra harmonica",
)
SKILLS = {
    "pdf-tools": ("Rotate, merge and split PDF pages. Use when a PDF needs rearranging.", "## Pages\nRotate pages.\n"),
    "image-resizer": ("Resize and compress images for the web.", "## Sizes\nThumbnails and banners.\n"),
    "release-notes": ("Write release notes from a changelog.", "## Draft\nGroup changes by kind.\n"),
    "budget-sheet": ("Build a quarterly budget spreadsheet.", "## Numbers\nSum each quarter.\n"),
}


def _write(root: Path, name: str, description: str, body: str) -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\n{body}", encoding="utf-8")
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    for name, (description, body) in SKILLS.items():
        _write(root, name, description, body)
    return root


def _catalog(root: Path) -> Catalog:
    return build_catalog(load_settings([str(root)], {"SKILL_MCP_CACHE": "off"}))


def _index(root: Path, cache: Path, clock: int | None = FAR_FUTURE_NS) -> tuple[Catalog, SearchIndex]:
    catalog = _catalog(root)
    return catalog, index_catalog(catalog, cache, now_ns=None if clock is None else (lambda _d: clock))


def _stored(index: SearchIndex) -> bool:
    """Whether the index was read from the file (its postings are read per term) or built."""
    return not isinstance(index.postings, dict)


def _answers(catalog: Catalog, index: SearchIndex) -> list[dict]:
    return [search_result(catalog, index, q, 10) for q in QUERIES]


def _same_as_fresh(catalog: Catalog, index: SearchIndex) -> None:
    fresh = index_catalog(catalog)
    assert index.names == fresh.names and tuple(index.headings) == fresh.headings
    assert dict(index.postings.items()) == fresh.postings  # every term, every posting, bit for bit
    assert _answers(catalog, index) == _answers(catalog, fresh)


def test_a_warm_start_reads_the_index_and_ranks_exactly_as_a_fresh_build(tree: Path, tmp_path: Path) -> None:
    catalog, first = _index(tree, tmp_path / "c")
    assert not _stored(first)
    assert index_file(tmp_path / "c", catalog.roots).is_file()
    catalog, second = _index(tree, tmp_path / "c")
    assert _stored(second)
    _same_as_fresh(catalog, second)
    assert search_result(catalog, second, "rotate a pdf page", 1)["hits"][0]["name"] == "pdf-tools"


def _change(tree: Path, change: str) -> tuple[str, str]:
    """Change the tree; returns a query and the skill that must now answer it first."""
    skill = tree / "budget-sheet" / "SKILL.md"
    if change == "description":
        _write(tree, "budget-sheet", "Tune a harmonica by ear.", SKILLS["budget-sheet"][1])
        return "harmonica", "budget-sheet"
    if change == "body":
        _write(tree, "budget-sheet", SKILLS["budget-sheet"][0], "## Numbers\nSum each zebra.\n")
        return "zebra", "budget-sheet"
    if change == "same-size-mtime-put-back":
        before = skill.stat()
        text = skill.read_text(encoding="utf-8").replace("quarter.", "zebras!.")
        skill.write_text(text, encoding="utf-8")
        os.utime(skill, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert skill.stat().st_size == before.st_size and skill.stat().st_mtime_ns == before.st_mtime_ns
        return "zebras", "budget-sheet"
    if change == "add":
        _write(tree, "zebra-care", "Feed and groom a zebra.", "## Food\nHay.\n")
        return "zebra", "zebra-care"
    if change == "remove":
        for path in sorted((tree / "pdf-tools").rglob("*"), reverse=True):
            path.unlink()
        (tree / "pdf-tools").rmdir()
        return "rotate pdf pages", ""  # "": the removed skill must not be among the hits
    if change == "rename":
        (tree / "pdf-tools").rename(tree / "pdf-pages")
        return "rotate a pdf page", "pdf-pages"
    raise AssertionError(change)


@pytest.mark.parametrize("change", ["description", "body", "same-size-mtime-put-back", "add", "remove", "rename"])
def test_every_change_to_a_skill_rebuilds_and_the_next_start_reads_it(tree: Path, tmp_path: Path, change: str) -> None:
    _index(tree, tmp_path / "c")
    catalog, warm = _index(tree, tmp_path / "c")
    assert _stored(warm)  # positive control: unchanged, the file is read
    query, expected = _change(tree, change)
    catalog, after = _index(tree, tmp_path / "c")
    assert not _stored(after)
    _same_as_fresh(catalog, after)
    hits = search_result(catalog, after, query, 3)["hits"]
    if expected:
        assert hits[0]["name"] == expected
    else:
        assert "pdf-tools" not in [h["name"] for h in hits]
    catalog, again = _index(tree, tmp_path / "c")
    assert _stored(again)
    _same_as_fresh(catalog, again)


def test_a_body_changed_in_the_tick_the_build_began_is_never_written(tree: Path, tmp_path: Path) -> None:
    newest = max(p.stat().st_ctime_ns for p in tree.rglob("SKILL.md"))
    catalog, _ = _index(tree, tmp_path / "c", clock=newest)  # the build began as the last file was written
    assert not index_file(tmp_path / "c", catalog.roots).exists()
    catalog, _ = _index(tree, tmp_path / "c", clock=None)  # the real clock: the tree was just written
    assert not index_file(tmp_path / "c", catalog.roots).exists()
    _index(tree, tmp_path / "c")  # positive control: an old enough tree is written
    assert index_file(tmp_path / "c", catalog.roots).exists()


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    header = json.loads(data[:HEADER_BYTES])
    if how == "header":
        data[5] ^= 0xFF
    elif how in ("names", "headings", "terms", "offsets", "digests"):
        offset, length, _ = header[how]
        data[offset + length // 2] ^= 0x01
    elif how == "truncated":
        del data[header["names"][0] :]
    elif how == "other-version":
        text = data[:HEADER_BYTES].decode().replace(header["version"], "0.0.0-other")
        data[:HEADER_BYTES] = text.ljust(HEADER_BYTES - 1).encode() + b"\n"
    path.write_bytes(bytes(data))
    if how == "writable-by-others":
        path.chmod(0o666)
    elif how == "symlink":
        moved = path.with_name("elsewhere")
        path.rename(moved)
        path.symlink_to(moved)


@pytest.mark.parametrize(
    "how",
    [
        "header",
        "names",
        "headings",
        "terms",
        "offsets",
        "digests",
        "truncated",
        "other-version",
        "writable-by-others",
        "symlink",
    ],
)
def test_a_damaged_or_foreign_index_file_is_rebuilt_never_served(tree: Path, tmp_path: Path, how: str) -> None:
    catalog, _ = _index(tree, tmp_path / "c")
    path = index_file(tmp_path / "c", catalog.roots)
    _damage(path, how)
    catalog, index = _index(tree, tmp_path / "c")
    assert not _stored(index)
    _same_as_fresh(catalog, index)


def test_damaged_postings_raise_rather_than_answer(tree: Path, tmp_path: Path) -> None:
    catalog, _ = _index(tree, tmp_path / "c")
    path = index_file(tmp_path / "c", catalog.roots)
    data = bytearray(path.read_bytes())
    end = json.loads(data[:HEADER_BYTES])["names"][0]  # the postings come first
    data[HEADER_BYTES:end] = bytes(b ^ 0x01 for b in data[HEADER_BYTES:end])  # every term's postings
    path.write_bytes(bytes(data))
    catalog, index = _index(tree, tmp_path / "c")
    assert _stored(index)  # opening checks the tables only; each term is checked when read
    with pytest.raises(StoredIndexError):
        search_result(catalog, index, "rotate a pdf page", 3)


def _fresh_tree(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    for name, (description, body) in SKILLS.items():
        _write(root, name, description, body)
    time.sleep(0.2)  # older than the racy margin of the real clock: a server may persist its index
    return root


@pytest.mark.anyio
async def test_the_server_persists_its_index_and_answers_right_after_damage(tmp_path: Path) -> None:
    root = _fresh_tree(tmp_path)
    settings = load_settings([str(root)], {"SKILL_MCP_CACHE_DIR": str(tmp_path / "c")})
    catalog = _catalog(root)
    path = index_file(tmp_path / "c", catalog.roots)
    args = {"query": "rotate a pdf page", "limit": 2}
    async with Client(build_server(settings), mode="2026-07-28") as client:
        first = (await client.call_tool("skill_search", args)).structured_content
    assert path.is_file()
    data = bytearray(path.read_bytes())
    end = json.loads(data[:HEADER_BYTES])["names"][0]  # the postings come first
    data[HEADER_BYTES:end] = bytes(b ^ 0x01 for b in data[HEADER_BYTES:end])
    path.write_bytes(bytes(data))
    async with Client(build_server(settings), mode="legacy") as client:
        second = (await client.call_tool("skill_search", args)).structured_content
    assert first == second and first is not None and first["hits"][0]["name"] == "pdf-tools"
    _, reread = _index(root, tmp_path / "c")  # the damaged file was replaced by a good one
    assert _stored(reread)
    _same_as_fresh(catalog, reread)


@pytest.mark.slow
def test_two_servers_at_once_share_one_cache_directory(tmp_path: Path) -> None:
    root = _fresh_tree(tmp_path)
    env = {"SKILL_MCP_CACHE_DIR": str(tmp_path / "c")}
    expected = run(
        "search", "rotate", "a", "pdf", "page", "--json", "--skills-dir", str(root), env={"SKILL_MCP_CACHE": "off"}
    )
    assert expected.returncode == 0

    def one(_: int) -> subprocess.CompletedProcess[str]:
        return run("search", "rotate", "a", "pdf", "page", "--json", "--skills-dir", str(root), env=env)

    for _ in range(3):  # cold (both build and write), then warm (both read while writes may land)
        with ThreadPoolExecutor(4) as pool:
            done = list(pool.map(one, range(4)))
        assert all(d.returncode == 0 and d.stdout == expected.stdout for d in done), [d.stderr for d in done]
    catalog, index = _index(root, tmp_path / "c")
    assert _stored(index)
    _same_as_fresh(catalog, index)
    assert not [p for p in (tmp_path / "c").iterdir() if p.name.endswith(".tmp")]


def test_a_new_release_removes_the_index_older_code_left_for_the_same_roots(tree: Path, tmp_path: Path) -> None:
    catalog, _ = _index(tree, tmp_path / "c")
    path = index_file(tmp_path / "c", catalog.roots)
    older = path.with_name(path.name.rsplit("-", 1)[0] + "-000000000000000000000000.v1")
    other_roots = tmp_path / "c" / "search-111111111111111111111111-000000000000000000000000.v1"
    for stale in (older, other_roots):
        stale.write_bytes(b"left by other code")
    _change(tree, "body")
    _index(tree, tmp_path / "c")  # rebuilt and written: the older file for these roots goes
    assert path.is_file() and not older.exists()
    assert other_roots.exists()  # another set of roots' file is not ours to judge


@pytest.mark.parametrize(
    "line",
    [
        b'{"a": 1}',  # not a list
        b'["a", 2]',  # not every heading text
        b'["a"] ',  # trailing bytes after the list
        b'["a"',  # cut short
        b"",  # nothing
        b'["\xff"]',  # not UTF-8
        b"[" * 100_000 + b"]" * 100_000,  # nested past the interpreter's depth
    ],
)
def test_a_headings_line_of_the_wrong_shape_raises_stored_index_error(line: bytes) -> None:
    """Denial: a persisted headings line under a good checksum that is not a list of strings is
    never a heading (``StoredIndexError``, so the search rebuilds); control: its neighbour reads."""
    from array import array

    from skill_mcp.search.store import _Headings

    good = b'["Usage", "Examples"]'
    headings = _Headings(good + line, array("Q", [0, len(good), len(good) + len(line)]))
    assert headings[0] == ("Usage", "Examples")
    with pytest.raises(StoredIndexError):
        headings[1]
