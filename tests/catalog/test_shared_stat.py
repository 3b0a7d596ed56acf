"""One ``lstat`` per file serves both checks a ``skills/list`` page owes (``catalog.filetier.known_checked``).

A page carries every file's size and digest, so before it answers, each of its skills' file tier
must hold (a cached record's rows: inode, size, mtime, ctime) and each digest must be one the
memo computed for the file as it is now (device, inode, size, mtime, ctime). ``known_page``
makes both checks on the same ``lstat`` and answers only when every file passes both; anything
else goes the reference way (``files_checked``, which reloads what changed, then the full
``list_skills``, which hashes what it must).

Checked here against the ground truth (a fresh scan and a fresh memo: every digest hashed from
the bytes on disk now): after any sequence of in-place changes (a new size, a same-size rewrite
with the mtime put back, a same-size replacement by rename), every page the server logic gives
is the truth, and an untouched page is answered on the shared path. The planted bugs (no
``lstat`` at all, an identity without the ctime, a file tier left unchecked) must each turn the
same checks red.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skill_mcp.catalog import filetier
from skill_mcp.catalog.cache import CatalogCache, cache_file
from skill_mcp.catalog.cached import CachedFiles
from skill_mcp.catalog.digest_memo import DigestMemo
from skill_mcp.catalog.discover import build_catalog
from skill_mcp.catalog.files import file_info
from skill_mcp.config import Settings, load_settings
from skill_mcp.models import Catalog, Skill, SkillFile
from skill_mcp.surfaces import skills_ext
from skill_mcp.surfaces.paging import encode_cursor
from skill_mcp.surfaces.state import files_checked
from tests.helpers import write_skill

SKILLS = ("alpha", "beta", "gamma")
TARGET = "ref/notes.md"
PAGE = 2  # two pages of the three skills
KINDS = ("append", "same-tick", "replace")
FAR_FUTURE_NS = 2**62
KnownChecked = Callable[[DigestMemo, Skill], "list[tuple[SkillFile, int, str]] | None"]


def _tree(root: Path) -> Path:
    for name in SKILLS:
        skill = write_skill(root, name, description=f"{name} does one thing well.")
        (skill / "ref" / "deep").mkdir(parents=True)
        (skill / TARGET).write_text(f"{name} notes, first.\n", encoding="utf-8")
        (skill / "ref" / "deep" / "more.md").write_text(f"{name} more\n", encoding="utf-8")
    return root


def _settings(root: Path, cache_dir: Path | None) -> Settings:
    env = {"SKILL_MCP_CACHE_DIR": str(cache_dir)} if cache_dir else {"SKILL_MCP_CACHE": "off"}
    return load_settings([str(root)], {"PATH": "/usr/bin:/bin", **env})


def _past_a_tick(path: Path) -> None:
    """Wait (bounded) until the clock is past ``path``'s ctime, so a write moves it."""
    ctime = path.lstat().st_ctime_ns
    deadline = time.monotonic() + 2
    while time.time_ns() <= ctime + 20_000_000 and time.monotonic() < deadline:
        time.sleep(0.005)


def _change(root: Path, name: str, kind: str) -> None:
    path = root / name / TARGET
    before = path.lstat()
    text = path.read_text(encoding="utf-8")
    _past_a_tick(path)
    if kind == "append":
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("and more.\n")
        return
    new = text.swapcase()
    assert len(new) == len(text) and new != text
    if kind == "same-tick":  # the same inode, size and mtime: only the ctime says so
        with open(path, "r+", encoding="utf-8") as handle:
            handle.write(new)
    else:  # "replace": another inode of the same size renamed over it, the mtime put back
        spare = path.with_name(".notes.tmp")
        spare.write_text(new, encoding="utf-8")
        os.utime(spare, ns=(before.st_atime_ns, before.st_mtime_ns))
        spare.rename(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.lstat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns or after.st_ino != before.st_ino


def _cursors(catalog: Catalog) -> list[str | None]:
    return [None, *(encode_cursor("skills", o) for o in range(PAGE, len(catalog.extension_listed), PAGE))]


def _truth(root: Path) -> list[dict[str, Any]]:
    """Every page from a fresh scan and a fresh memo: each digest hashed from the bytes now."""
    catalog, memo = build_catalog(_settings(root, None)), DigestMemo()
    return [skills_ext.list_skills(memo, catalog, c) or {} for c in _cursors(catalog)]


class Server:
    """What ``on_skills_list`` does, over a provider that swaps in what a refresh reloads."""

    def __init__(self, settings: Settings, catalog: Catalog) -> None:
        self.settings, self.catalog, self.memo = settings, catalog, DigestMemo()
        self.shared = 0  # pages answered by known_page

    def refresh(self, catalog: Catalog, skills: Sequence[Skill]) -> Catalog:
        self.catalog = filetier.rebuilt(self.settings, catalog, skills)
        return self.catalog

    def page(self, cursor: str | None) -> dict[str, Any]:
        body = skills_ext.known_page(self.memo, self.catalog, cursor)
        if body is not None:
            self.shared += 1
            return body

        async def reference() -> dict[str, Any]:
            catalog = await files_checked(self.catalog, lambda c: skills_ext.page_skills(c, cursor), self.refresh)
            return skills_ext.list_skills(self.memo, catalog, cursor) or {}

        return anyio.run(reference)

    def pages(self) -> list[dict[str, Any]]:
        return [self.page(c) for c in _cursors(self.catalog)]


def _unchecked(catalog: Catalog) -> list[CachedFiles]:
    return [s.files for s in catalog.extension_listed if isinstance(s.files, CachedFiles) and not s.files.checked]


def _rows_false(catalog: Catalog, unchecked: list[CachedFiles]) -> list[str]:
    """Skills whose cached record, unchecked before the walk, is now marked checked while a row
    does not hold (a record checked earlier stays checked by design: ``catalog.filetier``)."""
    out = []
    for skill in catalog.extension_listed:
        files = skill.files
        if isinstance(files, CachedFiles) and files.checked and any(files is u for u in unchecked):
            files.checked = False
            if not filetier.files_hold(skill.prefix, files):
                out.append(skill.name)
            files.checked = True
    return out


@contextmanager
def _page_size() -> Iterator[None]:
    """Pages of ``PAGE`` skills (the name ``skills_ext`` pages by), so a walk has two."""
    saved = getattr(skills_ext, "SKILLS_PAGE")  # noqa: B009 - imported there, not exported
    setattr(skills_ext, "SKILLS_PAGE", PAGE)  # noqa: B010
    try:
        yield
    finally:
        setattr(skills_ext, "SKILLS_PAGE", saved)  # noqa: B010


def _write_cache(root: Path, cache_dir: Path) -> None:
    """The cache for ``root`` as it is now, every entry kept (a clock for which nothing is recent)."""
    path = cache_file(cache_dir, [os.path.realpath(root)])
    build_catalog(_settings(root, cache_dir), cache=CatalogCache(path, now_ns=lambda _d: FAR_FUTURE_NS))


def _warm_cached_server(root: Path, cache_dir: Path) -> Server:
    """A server whose memo knows every digest and whose records come from the cache, unchecked
    (a warm build after a watch rebuild, say): the state in which one ``lstat`` serves both."""
    _write_cache(root, cache_dir)
    settings = _settings(root, cache_dir)
    server = Server(settings, build_catalog(settings, check_files=False))
    scanned = build_catalog(_settings(root, None))
    for skill in scanned.extension_listed:
        for f in skill.files:
            file_info(server.memo, skill, f)
    return server


def _scenario(changes: Sequence[tuple[str, str]], cached: bool) -> list[str]:
    """Run ``changes`` one after another between full walks; what went wrong, in words."""
    wrong: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, _page_size():
        root = _tree(Path(tmp) / "skills")
        if cached:
            server = _warm_cached_server(root, Path(tmp) / "cache")
        else:
            server = Server(_settings(root, None), build_catalog(_settings(root, None)))
        unchecked = _unchecked(server.catalog)
        if server.pages() != _truth(root):
            wrong.append("the first walk")
        if _rows_false(server.catalog, unchecked):
            wrong.append("a record marked checked whose rows do not hold, on the first walk")
        shared_before = server.shared
        if server.pages() != _truth(root):
            wrong.append("the untouched walk")
        if server.shared - shared_before != len(_cursors(server.catalog)):
            wrong.append("an untouched walk did not take the shared path")
        for name, kind in changes:
            _change(root, name, kind)
            unchecked = _unchecked(server.catalog)
            if server.pages() != _truth(root):
                wrong.append(f"after {kind} of {name}")
            if _rows_false(server.catalog, unchecked):
                wrong.append(f"a record marked checked whose rows do not hold, after {kind}")
    return wrong


CHANGES = st.lists(st.tuples(st.sampled_from(SKILLS), st.sampled_from(KINDS)), min_size=1, max_size=4)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=CHANGES, cached=st.booleans())
def test_every_page_is_the_truth_after_any_in_place_changes(changes: list[tuple[str, str]], cached: bool) -> None:
    assert _scenario(changes, cached) == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cached", [False, True])
def test_a_file_changed_between_two_walks_is_hashed_again(kind: str, cached: bool) -> None:
    assert _scenario([("beta", kind)], cached) == []


def test_one_lstat_per_file_serves_the_file_tier_and_the_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path / "skills")
    server = _warm_cached_server(root, tmp_path / "cache")
    assert all(isinstance(s.files, CachedFiles) and not s.files.checked for s in server.catalog.extension_listed)
    seen: list[str] = []
    real = os.lstat

    def counting(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        seen.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", counting)
    body = skills_ext.known_page(server.memo, server.catalog, None)
    monkeypatch.undo()
    files = [s.prefix + f.rel for s in server.catalog.extension_listed for f in s.files]
    assert body == _truth(root)[0]
    assert sorted(seen) == sorted(files)  # each file once: not once for the tier and once for the memo
    assert all(s.files.checked for s in server.catalog.extension_listed)  # type: ignore[attr-defined]


def test_a_stale_row_under_a_fresh_memo_is_left_to_the_reference_path(tmp_path: Path) -> None:
    """The memo knows the file as it is now, but the cached record's row is older: the page does
    not mark the record checked; the reference path reloads it."""
    root = _tree(tmp_path / "skills")
    _write_cache(root, tmp_path / "cache")
    _change(root, "beta", "append")
    settings = _settings(root, tmp_path / "cache")
    server = Server(settings, build_catalog(settings, check_files=False))
    scanned = build_catalog(_settings(root, None))
    for skill in scanned.extension_listed:
        for f in skill.files:
            file_info(server.memo, skill, f)
    beta = server.catalog.skills["beta"].files
    assert isinstance(beta, CachedFiles) and not beta.checked
    assert skills_ext.known_page(server.memo, server.catalog, None) is None
    assert not beta.checked
    assert server.pages() == _truth(root)
    assert not isinstance(server.catalog.skills["beta"].files, CachedFiles)  # reloaded from disk


# --- planted bugs: each must turn the checks above red ----------------------------------------------


def _no_stat(memo: DigestMemo, skill: Skill) -> list[tuple[SkillFile, int, str]] | None:
    """Trusts the memo and the record without looking at the disk."""
    held = memo.held(skill.prefix)
    if any(f.rel not in held for f in skill.files):
        return None
    return [(f, f.size, held[f.rel][1]) for f in skill.files]


def _checker(*, ctime: bool, rows: bool) -> KnownChecked:
    def known(memo: DigestMemo, skill: Skill) -> list[tuple[SkillFile, int, str]] | None:
        files, held, out = skill.files, memo.held(skill.prefix), []
        for i, f in enumerate(files):
            try:
                st_ = os.lstat(skill.prefix + f.rel)
            except OSError:
                return None
            got = held.get(f.rel)
            now = (st_.st_dev, st_.st_ino, st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns)
            if got is None or not stat.S_ISREG(st_.st_mode) or got[0][: 5 if ctime else 4] != now[: 5 if ctime else 4]:
                return None
            if rows and isinstance(files, CachedFiles) and not files.checked and f.rel != "SKILL.md":
                _rel, size, mtime, ino, ctime_ns = files.rows[i]
                if (ino, size, mtime, ctime_ns) != (st_.st_ino, st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns):
                    return None
            out.append((f, st_.st_size, got[1]))
        if isinstance(files, CachedFiles):
            files.checked = True
        return out

    return known


@pytest.mark.parametrize(
    ("bug", "changes", "cached"),
    [
        (_no_stat, [("beta", "append")], False),
        (_checker(ctime=False, rows=True), [("beta", "same-tick")], False),
        (_checker(ctime=False, rows=True), [("alpha", "same-tick")], True),
    ],
    ids=["no-lstat", "no-ctime", "no-ctime-cached"],
)
def test_planted_bugs_turn_the_walk_red(
    bug: KnownChecked, changes: list[tuple[str, str]], cached: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _scenario(changes, cached) == []  # the positive control
    monkeypatch.setattr(filetier, "known_checked", bug)
    assert _scenario(changes, cached) != []


def test_a_planted_unchecked_file_tier_turns_the_stale_row_check_red(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filetier, "known_checked", _checker(ctime=True, rows=False))
    with pytest.raises(AssertionError):
        test_a_stale_row_under_a_fresh_memo_is_left_to_the_reference_path(tmp_path)


def test_the_truth_is_a_fresh_hash(tmp_path: Path) -> None:
    """The oracle itself: its digests are the sha256 of the bytes on disk."""
    root = _tree(tmp_path / "skills")
    with _page_size():
        pages = _truth(root)
    for page in pages:
        for entry in page["skills"]:
            name = entry["uri"].removeprefix("skill://").split("/")[0]
            for res in entry["resources"]:
                rel = res["uri"].removeprefix(f"skill://{name}/")
                data = (root / name / rel).read_bytes()
                assert res["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
                assert res["size"] == len(data)
