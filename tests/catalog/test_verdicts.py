"""The scan helper's verdicts on a warm cache's directory stamps change no catalog.

On a warm start the helper checks the cache file's directory stamps (``catalog.verdicts``) and
the build skips the ``lstat`` calls of an entry found holding. These tests compare the catalog a
verdict-assisted warm build serves with the plain warm build's and a cache-less scan's, after a
change the helper saw; and feed the build every verdict it must refuse: about another cache
file, garbage, none at all (a dead or a slow helper). A planted helper that says "all hold"
without looking serves a stale skill: the comparison can fail, and only the helper's own
``lstat`` after the change keeps the catalog right.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.corpus import generate
from skill_mcp.catalog import cache as cache_module
from skill_mcp.catalog import discover, scan_helper, verdicts
from skill_mcp.catalog.cache import CatalogCache, cache_file
from skill_mcp.catalog.cachefile import open_owned
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(verdicts, "CHUNK", 4)  # many frames for a small catalog
    monkeypatch.setattr(verdicts, "_MAX_PAYLOAD", verdicts._IDENTITY.size + 4)
    monkeypatch.setattr(scan_helper, "single_threaded", lambda: True)  # the test process may run threads
    monkeypatch.setattr(scan_helper, "cores", lambda: 2)
    monkeypatch.setattr(scan_helper, "NICE", 0)
    yield
    scan_helper.dismiss()


@pytest.fixture
def warm(tmp_path: Path) -> tuple[Any, Path]:
    """Settings over a 30-skill corpus (nested directories included) whose cache is filled."""
    root = tmp_path / "skills"
    root.mkdir()
    generate(root, 30)
    (root / "alpha").mkdir()
    (root / "alpha" / "SKILL.md").write_text("---\nname: alpha\ndescription: d\n---\nbody\n")
    (root / "alpha" / "docs").mkdir()
    (root / "alpha" / "docs" / "a.md").write_text("a\n")
    settings = load_settings([str(root)], {"SKILL_MCP_CACHE_DIR": str(tmp_path / "cache")})
    # Every entry written: the scan's "now" is put far ahead, so none is found racy (the changes
    # the tests make come later, with later ctimes, and change a stamp).
    discover.build_catalog(settings, cache=CatalogCache(_path(settings), now_ns=lambda _: time.time_ns() + 10**12))
    assert CatalogCache(_path(settings)).held == 31
    return settings, root


def _path(settings: Any) -> Path:
    return cache_file(settings.cache_dir, verdicts.roots_real(settings.roots))


def _fresh(settings: Any) -> Catalog:
    return discover.build_catalog(load_settings([str(r) for r in settings.roots], {"SKILL_MCP_CACHE": "off"}))


def _same(a: Catalog, b: Catalog) -> bool:
    return (a.skills, a.problems, a.roots, a.packs) == (b.skills, b.problems, b.roots, b.packs)


def _pipe_of(data: bytes, *, close: bool = True) -> tuple[int, int | None]:
    """A non-blocking read end holding ``data``; the write end still open unless ``close``."""
    r, w = os.pipe()
    os.write(w, data)
    os.set_blocking(r, False)
    if close:
        os.close(w)
        return r, None
    return r, w


def _real_verdicts(settings: Any) -> bytes:
    """What a helper streams now for this cache file (``verify`` run here, as the helper runs it)."""
    r, w = os.pipe()
    verdicts.verify(_path(settings), w)
    os.close(w)
    out = b""
    while chunk := os.read(r, 1 << 16):
        out += chunk
    os.close(r)
    return out


def _all_hold(settings: Any) -> bytes:
    """A planted helper: every entry holds, without a look."""
    opened = open_owned(_path(settings))
    assert opened is not None
    fd, _ = opened
    tag = verdicts.identity(fd)
    os.close(fd)
    names = list(CatalogCache(_path(settings))._old_skills)
    out = b""
    for first in range(0, len(names), verdicts.CHUNK):
        bits = b"\1" * len(names[first : first + verdicts.CHUNK])
        payload = tag + bits
        out += verdicts.VERDICT + first.to_bytes(4, "big") + len(payload).to_bytes(4, "big") + payload
    return out + verdicts.END + bytes(8)


def _build_with(settings: Any, stream: bytes, *, close: bool = True) -> tuple[Catalog, set[str]]:
    """The warm build (listing tier, as the server's first) reading ``stream`` as its verdicts;
    the entries it took as held."""
    r, w = _pipe_of(stream, close=close)
    built: list[CatalogCache] = []
    try:
        cache = CatalogCache(_path(settings))
        cache.take_verdicts(r)
        built.append(cache)
        catalog = discover.build_catalog(settings, cache=cache, check_files=False)
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    v = built[0].verdicts
    assert v is not None
    return catalog, v.held


def test_a_verdict_assisted_warm_build_equals_the_plain_one(warm: tuple[Any, Path]) -> None:
    settings, _ = warm
    plain = discover.build_catalog(settings, check_files=False)
    catalog, held = _build_with(settings, _real_verdicts(settings))
    assert len(held) == 31  # every entry was taken as held: none changed
    assert _same(catalog, plain)
    assert _same(catalog, _fresh(settings))


def test_held_entries_skip_their_lstat_calls(warm: tuple[Any, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    settings, _ = warm
    stream = _real_verdicts(settings)
    calls: list[str] = []
    hold = cache_module.stamps_hold

    def spy(base: str, stamps: Any) -> bool:
        calls.append(base)
        return hold(base, stamps)

    monkeypatch.setattr(cache_module, "stamps_hold", spy)
    _build_with(settings, stream)
    assert calls == []
    _build_with(settings, b"")  # no verdicts: every entry checked here
    assert len(calls) == 31


def _change(root: Path) -> None:
    """A file added in a nested directory: only that directory's stamp changes."""
    (root / "alpha" / "docs" / "b.md").write_text("b\n")


def test_a_change_the_helper_saw_is_reloaded(warm: tuple[Any, Path]) -> None:
    settings, root = warm
    _change(root)
    catalog, held = _build_with(settings, _real_verdicts(settings))  # the helper looks after the change
    assert str(root / "alpha") not in held and held
    assert _same(catalog, _fresh(settings))


def test_a_planted_helper_saying_all_hold_serves_a_stale_skill(warm: tuple[Any, Path]) -> None:  # negative control
    settings, root = warm
    _change(root)
    catalog, _ = _build_with(settings, _all_hold(settings))
    assert not _same(catalog, _fresh(settings))  # the comparison above can fail


def test_a_verdict_about_another_cache_file_is_ignored(warm: tuple[Any, Path]) -> None:
    settings, root = warm
    stale = _all_hold(settings)  # tagged with the file as it is now
    _change(root)
    discover.build_catalog(settings)  # rewrites the cache file (another file, renamed over it)
    (root / "alpha" / "docs" / "c.md").write_text("c\n")  # and a change that file does not know
    catalog, held = _build_with(settings, stale)
    assert held == set()
    assert _same(catalog, _fresh(settings))


def _garbage(settings: Any) -> list[bytes]:
    good = _all_hold(settings)
    head = good[:9]
    tag_end = 9 + verdicts._IDENTITY.size
    return [
        b"\xff" * 64,  # noise
        b"q" + good[1:],  # an unknown kind
        head + good[9:tag_end] + b"\2" + good[tag_end + 1 :],  # a bit that is neither 0 nor 1
        good[:1] + (1).to_bytes(4, "big") + good[5:],  # a chunk that does not start on a chunk
        good[:5] + (10**6).to_bytes(4, "big") + good[9:],  # a length past any frame
        good[:9] + bytes(verdicts._IDENTITY.size) + good[tag_end:],  # a zero identity
        good[: 9 + verdicts._IDENTITY.size],  # a frame cut short, then the end of the pipe
    ]


@pytest.mark.parametrize("which", range(7))
def test_garbage_frames_give_the_same_catalog(warm: tuple[Any, Path], which: int) -> None:
    settings, root = warm
    stream = _garbage(settings)[which]
    _change(root)  # a stale verdict taken from garbage would show
    catalog, held = _build_with(settings, stream)
    assert held == set()
    assert _same(catalog, _fresh(settings))


def test_a_dead_or_slow_helper_gives_the_same_catalog(warm: tuple[Any, Path]) -> None:
    settings, _ = warm
    plain = discover.build_catalog(settings, check_files=False)
    dead, held = _build_with(settings, b"")  # the end of the pipe at once
    assert held == set() and _same(dead, plain)
    slow, held = _build_with(settings, b"", close=False)  # nothing yet, the pipe still open: never waited for
    assert held == set() and _same(slow, plain)


def test_the_server_s_helper_checks_a_warm_cache(warm: tuple[Any, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Forked as ``serve_stdio_early`` forks it on a warm start; the build takes its verdicts and
    ends it."""
    settings, root = warm
    _change(root)  # before the helper looks
    plain = _fresh(settings)
    assert scan_helper.start(verify=(settings.cache_dir, list(settings.roots)))
    helper = scan_helper.waiting()
    assert helper is not None and helper.verdicts is not None
    poll = select.poll()
    poll.register(helper.verdicts, select.POLLIN)
    assert poll.poll(30_000)  # a first chunk has come (the build would not wait for it)
    taken: list[CatalogCache] = []
    read: list[verdicts.Verdicts | None] = []
    take = CatalogCache.take_verdicts

    def spy(self: CatalogCache, fd: int) -> None:
        take(self, fd)
        taken.append(self)
        read.append(self.verdicts)

    monkeypatch.setattr(CatalogCache, "take_verdicts", spy)
    catalog = discover.build_catalog(settings, check_files=False)
    assert scan_helper.waiting() is None and helper.closed
    assert taken and taken[0].verdicts is None  # let go before the pipe was closed
    used = read[0]
    assert used is not None and used.held  # the helper's verdicts served the build
    assert os.path.realpath(root / "alpha") not in used.held  # the change it saw
    assert _same(catalog, plain)
