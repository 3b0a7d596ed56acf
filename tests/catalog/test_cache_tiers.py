"""Each answer is checked against exactly what it carries, never less (docs/architecture.md,
"The catalog cache": listing tier, file tier).

A cache is written for a tree, the tree is changed the way a person or a tool changes it (a
file's content rewritten in place, a file added, removed or renamed, a same-size rewrite with
the mtime put back, so only the ctime differs) or the cache file is forged under a good
checksum, and then a warm in-process server (the real SDK client on the real server, the
catalog provider a served process uses) must give, for every answer kind, what a server
without a cache gives on the same tree. Beside the answer, each test checks which tier ran:
a listing answer must not have checked (or reloaded) the file tier of a skill whose
directories held, and a file answer must have reloaded the skill whose file facts changed.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from skill_mcp.catalog.cache import CatalogCache, cache_file
from skill_mcp.catalog.cached import CachedFiles
from skill_mcp.catalog.discover import build_catalog
from skill_mcp.catalog.lazy import LazyCatalog
from skill_mcp.config import Settings, load_settings
from tests.catalog.test_cache import _rechecksummed
from tests.helpers import write_skill
from tests.integration.harness import directory_read, skills_get, skills_list

FAR_FUTURE_NS = 2**62  # an injected clock for which nothing on disk is recent: every entry is written

DECLARES = "mcp-host:\n  version: 1\n  run:\n    - script: scripts/run.py\n      interpreter: python\n"
GUIDE = "one/references/guide.md"


def _tree(root: Path) -> Path:
    one = write_skill(root, "one", description="One turns notes into reports.", extra=DECLARES)
    (one / "scripts").mkdir()
    (one / "scripts" / "run.py").write_text("print('one')\n", encoding="utf-8")
    (one / "references").mkdir()
    (one / "references" / "guide.md").write_text("# Guide\n\nStep one.\n", encoding="utf-8")
    two = write_skill(root, "two", description="Two answers questions about reports.")
    (two / "notes.md").write_text("notes\n", encoding="utf-8")
    three = write_skill(root, "three", description="Three is never touched.")
    (three / "refs").mkdir()
    (three / "refs" / "a.md").write_text("a\n", encoding="utf-8")
    write_skill(root, "Bad-Name")  # a refusal: the problem reports have something to say
    return root


def _settings(root: Path, cache_dir: Path | None) -> Settings:
    env = {"SKILL_MCP_CACHE_DIR": str(cache_dir)} if cache_dir else {"SKILL_MCP_CACHE": "off"}
    return load_settings([str(root)], {"PATH": "/usr/bin:/bin", "MCP_CONFIRM_ELICITATION": "off", **env})


def _write_cache(root: Path, cache_dir: Path) -> Path:
    path = cache_file(cache_dir, [os.path.realpath(root)])
    build_catalog(_settings(root, cache_dir), cache=CatalogCache(path, now_ns=lambda _d: FAR_FUTURE_NS))
    return path


@asynccontextmanager
async def _serving(root: Path, cache_dir: Path | None) -> AsyncIterator[tuple[Client, LazyCatalog]]:
    """A real server in this process (the SDK's in-memory transport) on the provider a served
    process uses."""
    from skill_mcp.server import build_server

    settings = _settings(root, cache_dir)
    provider = LazyCatalog(settings)
    # The read tools alone: no runner is built, so nothing hardens (wipes) this test process.
    async with Client(build_server(settings, provider), mode="legacy") as client:
        yield client, provider


def _structured(result: Any) -> Any:
    if result.is_error:
        return {"error": result.structured_content.get("reason") if result.structured_content else "error"}
    return result.structured_content


async def _outcome(ask: Callable[[], Awaitable[Any]]) -> Any:
    try:
        return await ask()
    except MCPError as err:
        return {"error": err.error.code, "message": err.error.message}


# --- the answers, each reduced to what it carries -------------------------------------------------


async def skill_list(c: Client) -> Any:
    page = _structured(await c.call_tool("skill_list", {}))
    return {e["name"]: e for e in page["skills"]}


async def problems(c: Client) -> Any:
    page = _structured(await c.call_tool("skill_list", {}))
    return sorted(json.dumps(p, sort_keys=True) for p in page["problems"])


async def skill_search(c: Client) -> Any:
    page = _structured(await c.call_tool("skill_search", {"query": "reports"}))
    return page["hits"], page["count"], page["searched"]


async def prompts_list(c: Client) -> Any:
    return [(p.name, p.description) for p in (await c.list_prompts()).prompts]


async def skill_load(c: Client) -> Any:
    out = _structured(await c.call_tool("skill_load", {"name": "one"}))
    return out.get("files", out), out.get("scripts")


async def skills_list_ext(c: Client) -> Any:
    return (await skills_list(c))["skills"]


async def skills_get_ext(c: Client) -> Any:
    return await _outcome(lambda: skills_get(c, "skill://one/SKILL.md"))


async def resources_list(c: Client) -> Any:
    return sorted((r.uri, r.size) for r in (await c.list_resources()).resources)


async def resources_read(c: Client) -> Any:
    async def read() -> Any:
        return [(x.uri, getattr(x, "text", None)) for x in (await c.read_resource(f"skill://{GUIDE}")).contents]

    return await _outcome(read)


async def skill_file(c: Client) -> Any:
    out = _structured(await c.call_tool("skill_file", {"name": "one", "paths": ["references/guide.md"]}))
    return out["files"]


async def directory(c: Client) -> Any:
    out = await _outcome(lambda: directory_read(c, "skill://one/references"))
    return out.get("resources", out)


LISTING = {"skill_list": skill_list, "problems": problems, "skill_search": skill_search, "prompts_list": prompts_list}
FILES = {
    "skill_load": skill_load,
    "skills_list": skills_list_ext,
    "skills_get": skills_get_ext,
    "resources_list": resources_list,
    "resources_read": resources_read,
    "skill_file": skill_file,
    "directory_read": directory,
}


# --- the changes ----------------------------------------------------------------------------------


def change(root: Path) -> None:
    """The content rewritten in place: a new size, the same inode, no directory stamp changed."""
    with open(root / GUIDE, "a", encoding="utf-8") as handle:
        handle.write("Step two, added in place.\n")


def add(root: Path) -> None:
    (root / "one" / "references" / "extra.md").write_text("extra\n", encoding="utf-8")


def remove(root: Path) -> None:
    (root / GUIDE).unlink()


def rename(root: Path) -> None:
    (root / GUIDE).rename(root / "one" / "references" / "guide2.md")


def same_tick(root: Path) -> None:
    """Same inode, size and mtime (put back); only the ctime says the bytes changed."""
    path = root / GUIDE
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    new = text.replace("Step one.", "STEP ONE.")
    assert len(new) == len(text)
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(new)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    now = path.stat()
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert now.st_ctime_ns != before.st_ctime_ns


def forge(cache: Path) -> None:
    """A cache entry whose directory stamps are true and whose file row lies (another name, another
    size), under a checksum made right again: only the file tier can see it."""
    data = cache.read_bytes()
    line = next(x for x in data.split(b"\n") if b'"name":"one"' in x)
    kind, real, head, stamps, frontmatter, body = line.split(b"\t", 5)
    rows = json.loads(body)
    row = next(r for r in rows if r[0] == "references/guide.md")
    row[0], row[1] = "references/ghost.md", row[1] + 7
    forged = b"\t".join((kind, real, head, stamps, frontmatter, json.dumps(rows, separators=(",", ":")).encode()))
    cache.write_bytes(_rechecksummed(data.replace(line, forged)))


CHANGES = ["change", "add", "remove", "rename", "same-tick", "forged-row"]
# The changes that leave every directory stamp (the listing tier) as it was.
IN_PLACE = {"change", "same-tick", "forged-row"}


def _apply(kind: str, root: Path, cache: Path) -> None:
    if kind == "forged-row":
        forge(cache)
    else:
        {"change": change, "add": add, "remove": remove, "rename": rename, "same-tick": same_tick}[kind](root)
    # Past the racy margin, so the server's reload may write what it read (the replaced entry).
    from tests.integration.harness import settle_clock

    settle_clock(root)


async def _expected(root: Path, answer: Callable[[Client], Awaitable[Any]]) -> Any:
    async with _serving(root, None) as (client, _provider):
        return await answer(client)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return _tree(tmp_path / "skills")


@pytest.mark.anyio
@pytest.mark.parametrize("kind", CHANGES)
@pytest.mark.parametrize("answer", sorted(LISTING))
async def test_a_listing_answer_is_right_and_checks_only_the_listing_tier(
    tree: Path, tmp_path: Path, kind: str, answer: str
) -> None:
    cache = _write_cache(tree, tmp_path / "c")
    _apply(kind, tree, cache)
    async with _serving(tree, tmp_path / "c") as (client, provider):
        got = await LISTING[answer](client)
        catalog = provider()
    assert got == await _expected(tree, LISTING[answer])
    one, three = catalog.skills["one"].files, catalog.skills["three"].files
    # The untouched skill came from the cache, unchecked: a listing pays no file tier.
    assert isinstance(three, CachedFiles) and not three.checked
    if kind in IN_PLACE:
        assert isinstance(one, CachedFiles) and not one.checked  # its directories held: reused, files unchecked
    else:
        assert not isinstance(one, CachedFiles)  # a directory stamp changed: read from disk at the build


@pytest.mark.anyio
@pytest.mark.parametrize("kind", CHANGES)
@pytest.mark.parametrize("answer", sorted(FILES))
async def test_a_file_answer_checks_its_skills_file_tier_and_reloads_what_changed(
    tree: Path, tmp_path: Path, kind: str, answer: str
) -> None:
    cache = _write_cache(tree, tmp_path / "c")
    _apply(kind, tree, cache)
    async with _serving(tree, tmp_path / "c") as (client, provider):
        got = await FILES[answer](client)
        catalog = provider()
    assert got == await _expected(tree, FILES[answer])
    # The skill the answer carries is now either checked or read from disk again.
    one = catalog.skills["one"].files
    if kind in IN_PLACE:
        assert not isinstance(one, CachedFiles)  # the file tier found the change: reloaded
    assert not isinstance(one, CachedFiles) or one.checked
    if answer not in ("resources_list", "skills_list"):  # a page carries every skill on it
        three = catalog.skills["three"].files
        assert isinstance(three, CachedFiles) and not three.checked  # not this answer's skill
    # The reload replaced the entry: a new server reuses it, and its rows hold.
    if kind in IN_PLACE:
        async with _serving(tree, tmp_path / "c") as (_client, again):
            fresh = again().skills["one"].files
            assert isinstance(fresh, CachedFiles)
            from skill_mcp.catalog.filetier import files_hold

            assert files_hold(again().skills["one"].prefix, fresh)


@pytest.mark.anyio
async def test_untouched_a_warm_server_answers_from_the_cache_and_checks_each_skill_once(
    tree: Path, tmp_path: Path
) -> None:
    """The positive control: with nothing changed, no skill is reloaded; a file answer checks its
    skill once, and a second answer finds it checked."""
    _write_cache(tree, tmp_path / "c")
    async with _serving(tree, tmp_path / "c") as (client, provider):
        assert await skill_list(client) == await _expected(tree, skill_list)
        first = provider()
        assert all(isinstance(s.files, CachedFiles) and not s.files.checked for s in first.skills.values())
        assert await skill_load(client) == await _expected(tree, skill_load)
        assert provider() is first and first.skills["one"].files.checked  # type: ignore[attr-defined]
        assert await resources_list(client) == await _expected(tree, resources_list)
        assert provider() is first
        assert all(s.files.checked for s in first.skills.values())  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_reload_by_the_file_tier_shows_in_the_next_listing(tree: Path, tmp_path: Path) -> None:
    """SKILL.md unchanged, the declared script removed after the build (the listing tier was
    checked before): the first answer carrying one's files reloads it, and the next listing
    (the same catalog for every later request) says the script is missing."""
    _write_cache(tree, tmp_path / "c")
    async with _serving(tree, tmp_path / "c") as (client, provider):
        before = await skill_list(client)
        assert before["one"]["scripts"][0]["state"] != "missing"
        (tree / "one" / "scripts" / "run.py").unlink()
        assert await skill_list(client) == before  # a listing is the build's snapshot
        files, scripts = await skill_load(client)
        assert "scripts/run.py" not in [f["path"] for f in files]
        assert scripts[0]["state"] == "missing"
        after = await skill_list(client)
        assert after["one"]["scripts"][0]["state"] == "missing"
        assert any(
            p["reason"] == "declared-script-missing"
            for p in _structured(await client.call_tool("skill_list", {}))["problems"]
        )
        assert not isinstance(provider().skills["one"].files, CachedFiles)
    assert after == await _expected(tree, skill_list)


@pytest.mark.anyio
async def test_a_reload_that_refuses_the_skill_removes_it_from_the_listing(tree: Path, tmp_path: Path) -> None:
    """The skill's SKILL.md broken and a file rewritten after the build: the file tier reloads
    the skill, which no longer loads; the answer refuses it and the next listing omits it and
    reports why."""
    _write_cache(tree, tmp_path / "c")
    async with _serving(tree, tmp_path / "c") as (client, _provider):
        assert "one" in await skill_list(client)
        (tree / "one" / "SKILL.md").write_text("---\nname: one\ndescription: [unclosed\n---\n", encoding="utf-8")
        change(tree)
        refused = _structured(await client.call_tool("skill_load", {"name": "one"}))
        assert refused == {"error": "unknown-skill"}
        after = await skill_list(client)
        assert "one" not in after
        reported = _structured(await client.call_tool("skill_list", {}))["problems"]
        assert any(p["reason"] == "frontmatter-parse" and p.get("skill") == "one" for p in reported)
    assert after == await _expected(tree, skill_list)


def test_a_watch_rebuild_checks_both_tiers(tree: Path, tmp_path: Path) -> None:
    """``serve --watch`` starts on the listing tier, but its rebuild after a change checks every
    file too: a file rewritten in place changes no directory stamp, and an entry reused unchecked
    would compare equal to the record served before and never be swapped in."""
    from skill_mcp.catalog.watch import LiveCatalog, rebuild

    _write_cache(tree, tmp_path / "c")
    settings = _settings(tree, tmp_path / "c")
    live = LiveCatalog(settings)
    first = live()
    assert isinstance(first.skills["one"].files, CachedFiles) and not first.skills["one"].files.checked
    assert not rebuild(settings, live, 1)  # the control: nothing changed, nothing swapped
    change(tree)
    assert rebuild(settings, live, 2)
    guide = live().skills["one"].file("references/guide.md")
    assert guide is not None and guide.size == (tree / GUIDE).stat().st_size
    assert live().skills == build_catalog(_settings(tree, None)).skills


def test_a_cached_build_checking_both_tiers_sees_a_file_rewritten_in_place(tree: Path, tmp_path: Path) -> None:
    """The commands' build (``check_files`` by default) reloads a skill whose file changed in
    place; the listing-tier build reuses it, unchecked, for the file tier to find."""
    _write_cache(tree, tmp_path / "c")
    change(tree)
    settings = _settings(tree, tmp_path / "c")
    listing = build_catalog(settings, check_files=False)
    one = listing.skills["one"].files
    assert isinstance(one, CachedFiles) and not one.checked
    from skill_mcp.catalog.filetier import stale

    assert stale(listing.skills.values()) == [listing.skills["one"]]
    full = build_catalog(settings)
    assert not isinstance(full.skills["one"].files, CachedFiles)
    assert full.skills == build_catalog(_settings(tree, None)).skills
