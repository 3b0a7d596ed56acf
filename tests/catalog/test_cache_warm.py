"""The warm path: each cached entry read through a window, its listing parsed, the rest on first use.

The frontmatter and the rows of a reused record are JSON text until ``catalog.filetier`` (or an
answer) reads them: text this code never writes, under a good checksum, must then fail the file
tier (the skill is read from disk again), never become values. The stamp of SKILL.md the build
checked rides on the records, and the search index's key reads it in place of a second ``lstat``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skill_mcp.catalog.cached import CachedFiles, CachedFrontmatter
from skill_mcp.catalog.codec import split_entry, stamps_at, stamps_of
from skill_mcp.catalog.discover import build_catalog
from skill_mcp.catalog.filetier import files_hold, reload_dirs, stale
from skill_mcp.search.source import current_key
from skill_mcp.search.store import stamp_now
from tests.catalog.test_cache import _cache, _rechecksummed, _settings, cached, cold, same
from tests.helpers import write_skill
from tests.integration.harness import build_tree


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = build_tree(tmp_path / "skills")
    write_skill(root, "parent")
    write_skill(root / "parent", "child")  # a nested skill, published flat
    return root


def _warm(root: Path, cache_dir: Path):
    """A server's warm build: the listing tier only."""
    return build_catalog(_settings(root, cache_dir), cache=_cache(root, cache_dir), check_files=False)


def _damage(root: Path, cache_dir: Path, name: str, part: int, text: bytes) -> None:
    """Replace part ``part`` of ``name``'s line (3: the directories' stamps, 4: the frontmatter,
    5: the file rows) with ``text``, the checksum made right again."""
    path = _cache(root, cache_dir).path
    data = path.read_bytes()
    line = next(x for x in data.split(b"\n") if f'"name":"{name}"'.encode() in x)
    parts = line.split(b"\t", 5)
    parts[part] = text
    path.write_bytes(_rechecksummed(data.replace(line, b"\t".join(parts))))


def _damage_rows(root: Path, cache_dir: Path, name: str, rows_text: bytes) -> None:
    _damage(root, cache_dir, name, 5, rows_text)


def _rows_of(root: Path, cache_dir: Path, name: str) -> list:
    data = _cache(root, cache_dir).path.read_bytes()
    line = next(x for x in data.split(b"\n") if f'"name":"{name}"'.encode() in x)
    return json.loads(line.split(b"\t", 5)[5])


DAMAGE = {
    "not-json": lambda rows: b"[[",
    "not-a-list": lambda rows: b'{"a":1}',
    "a-row-of-the-wrong-shape": lambda rows: json.dumps([[rows[0][0], "not-a-size"], *rows[1:]]).encode(),
    "one-row-fewer-than-counted": lambda rows: json.dumps(rows[1:]).encode(),
    "one-row-more-than-counted": lambda rows: json.dumps([*rows, rows[0]]).encode(),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_rows_are_reused_for_the_listing_then_fail_the_file_tier(
    tree: Path, tmp_path: Path, damage: str
) -> None:
    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    _damage_rows(tree, cache_dir, "beta", DAMAGE[damage](_rows_of(tree, cache_dir, "beta")))
    warm = _warm(tree, cache_dir)
    beta = warm.skills["beta"]
    files = beta.files
    assert isinstance(files, CachedFiles) and not files.checked
    assert len(files) == len(cold(tree).skills["beta"].files)  # the listing's count, no row parsed
    with pytest.raises(ValueError):
        _ = files.rows
    with pytest.raises(ValueError):
        list(files)  # never records made of damaged rows
    assert not files_hold(beta.prefix, files) and not files.checked
    assert stale(warm.skills.values()) == [beta]  # the only one: every other record holds
    # The provider's reload reads it from disk, and the result is the cold one.
    again = build_catalog(_settings(tree, cache_dir), cache=_cache(tree, cache_dir), reload=reload_dirs([beta]))
    same(again, cold(tree))
    # A build that checks both tiers (the commands) never reuses the damaged entry either.
    after, _cache_used = cached(tree, cache_dir)
    same(after, cold(tree))


def test_undamaged_rows_hold_and_make_the_cold_records(tree: Path, tmp_path: Path) -> None:
    """The control of the test above: the same steps on an entry left as written."""
    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    warm = _warm(tree, cache_dir)
    assert stale(warm.skills.values()) == []
    fresh = cold(tree)
    for name, skill in warm.skills.items():
        assert isinstance(skill.files, CachedFiles) and skill.files.checked
        assert tuple(skill.files) == tuple(fresh.skills[name].files)


def test_the_search_key_of_a_warm_catalog_is_the_key_of_the_same_files_stamped_now(tree: Path, tmp_path: Path) -> None:
    """Differential: the key made from the stamps the warm build checked equals the key made by
    an ``lstat`` of every SKILL.md now, which a cold catalog's records need."""
    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    warm = _warm(tree, cache_dir)
    assert all(isinstance(s.files, CachedFiles) and s.files.skill_md for s in warm.skills.values())
    fresh = cold(tree)
    assert not any(isinstance(s.files, CachedFiles) for s in fresh.skills.values())

    def ordered(catalog):
        return sorted(catalog.skills.values(), key=lambda s: s.name)

    assert current_key(ordered(warm)) == current_key(ordered(fresh))
    for skill in warm.skills.values():
        assert skill.files.skill_md == stamp_now(skill.prefix + "SKILL.md")


def test_the_search_key_changes_with_the_stamp_the_build_checked(tree: Path, tmp_path: Path) -> None:
    """Negative control: a record whose checked stamp differs (as another build's would) has
    another key, so an index persisted for other bodies is never opened for it."""
    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    warm = _warm(tree, cache_dir)
    skills = sorted(warm.skills.values(), key=lambda s: s.name)
    before = current_key(skills)
    files = skills[0].files
    assert isinstance(files, CachedFiles) and files.skill_md is not None
    ino, size, mtime, ctime = files.skill_md
    files.skill_md = (ino, size, mtime, ctime + 1)
    assert current_key(skills) != before


@pytest.mark.parametrize(
    "body",
    [
        b'["x","/r",null,null,[],[]]',
        b'["x","/r",null,null,[],[]]\t[]',
        b'["x","/r",null,null,[],[]]\t[]\t{}',
        b'["x","/r",null,null,[],[]]\t[]\t{}\t[]\t[]',
        b'["x","/r",null,null,[],[]] [1]\t[]\t{}\t[]',
        b"[1,2]\t[]\t{}\t[]",
        b'["x","/r",null,[],null,[],[]]\t[]\t{}\t[]',
        b'"x"\t[]\t{}\t[]',
        b'["x",\t[]\t{}\t[]',
        b"\t[]\t{}\t[]",
        b'["x","/r",null,null,[],[]]x\t[]\t{}\t[]',
    ],
)
def test_an_entry_this_code_never_writes_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError):
        split_entry(body)


def test_an_entry_as_written_splits_in_its_listing_stamps_frontmatter_and_rows() -> None:
    listing, stamps, frontmatter, rows = split_entry(
        b'["x","/r",[1,2,3,4],null,[],[]]\t[["",5,6,7,8]]\t{"name":"x"}\t[["SKILL.md",1,2,3,4]]'
    )
    assert listing == ["x", "/r", [1, 2, 3, 4], None, [], []]
    assert stamps_of(stamps) == [["", 5, 6, 7, 8]]
    assert frontmatter == b'{"name":"x"}' and rows == b'[["SKILL.md",1,2,3,4]]'


@pytest.mark.parametrize("stamps", [b"", b"{}", b'"x"', b"[1", b"[] []", b"\xff"])
def test_directory_stamps_this_code_never_writes_are_refused(stamps: bytes) -> None:
    body = b'["x","/r",null,null,[],[]]\t' + stamps + b"\t{}\t[]"
    with pytest.raises(ValueError):
        stamps_of(split_entry(body)[1])
    with pytest.raises(ValueError):
        stamps_at(body, 0, len(body))


def test_the_scan_helper_reads_the_stamps_without_decoding_the_listing() -> None:
    """``stamps_at`` (what ``catalog.verdicts`` checks) never reads the listing: one that is not
    JSON at all still gives the stamps, where ``split_entry`` refuses the entry."""
    body = b'not a listing\t[["",5,6,7,8]]\t{}\t[]'
    assert stamps_at(body, 0, len(body)) == [["", 5, 6, 7, 8]]
    with pytest.raises(ValueError):
        split_entry(body)


def test_a_listing_of_an_earlier_format_is_refused() -> None:
    """Format 3 wrote the listing as an object, format 4 the directories' stamps inside it, in an
    entry of three parts; their files have other names and headers, and an entry of either under
    this header is still refused, not read by position."""
    with pytest.raises(ValueError):
        split_entry(b'{"at":"x","root":"/r","stamps":[],"skill":null,"problems":[],"nested":[]}\t{}\t[]')
    with pytest.raises(ValueError):
        split_entry(b'["x","/r",null,[],null,[],[]]\t{}\t[]')


FRONTMATTER_DAMAGE = {
    "not-json": b"{{",
    "not-a-mapping": b"[1]",
    "another-description": b'{"name":"beta","description":"Not what the listing says."}',
    "no-description": b'{"name":"beta"}',
}


@pytest.mark.parametrize("damage", sorted(FRONTMATTER_DAMAGE))
def test_a_damaged_frontmatter_is_listed_by_its_description_then_fails_the_file_tier(
    tree: Path, tmp_path: Path, damage: str
) -> None:
    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    _damage(tree, cache_dir, "beta", 4, FRONTMATTER_DAMAGE[damage])
    warm = _warm(tree, cache_dir)
    beta = warm.skills["beta"]
    frontmatter = beta.frontmatter
    assert isinstance(frontmatter, CachedFrontmatter)
    assert beta.description == cold(tree).skills["beta"].description  # the listing's, no frontmatter read
    with pytest.raises(ValueError):
        frontmatter.get("name")
    with pytest.raises(ValueError):
        dict(frontmatter)  # never an answer made of it
    assert isinstance(beta.files, CachedFiles) and not files_hold(beta.prefix, beta.files, frontmatter)
    assert stale(warm.skills.values()) == [beta]
    # The search degrades for it (searched without its frontmatter), it does not fail.
    assert current_key(sorted(warm.skills.values(), key=lambda s: s.name))
    again = build_catalog(_settings(tree, cache_dir), cache=_cache(tree, cache_dir), reload=reload_dirs([beta]))
    same(again, cold(tree))
    after, _cache_used = cached(tree, cache_dir)  # both tiers checked at the build: a miss
    same(after, cold(tree))


def test_a_cached_frontmatter_reads_as_the_scanned_one(tree: Path, tmp_path: Path) -> None:
    """Differential: every record's frontmatter, decoded on first use, equals the cold scan's, as
    a mapping and key by key; keys and short values are shared across skills (interned)."""
    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    warm, fresh = _warm(tree, cache_dir), cold(tree)
    for name, skill in warm.skills.items():
        frontmatter, scanned = skill.frontmatter, fresh.skills[name].frontmatter
        assert isinstance(frontmatter, CachedFrontmatter) and isinstance(scanned, dict)
        assert frontmatter == scanned and scanned == frontmatter and dict(frontmatter) == scanned
        assert len(frontmatter) == len(scanned) and list(frontmatter) == list(scanned)
        assert all(frontmatter[k] == v and k in frontmatter for k, v in scanned.items())
        assert frontmatter.get("no-such-key", 7) == 7 and "no-such-key" not in frontmatter
    keys = [next(k for k in s.frontmatter if k == "description") for s in warm.skills.values()]
    assert all(k is keys[0] for k in keys)
    # Negative control of the equality: a frontmatter with one value changed is another one.
    some = next(iter(warm.skills.values())).frontmatter
    assert some != {**dict(some), "description": "changed"}


def test_entries_read_through_the_window_are_the_bytes_at_their_spans(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Differential: every entry's bytes, read through the read-ahead window in file order,
    backwards and shuffled, with a window smaller and larger than an entry, are the bytes a
    ``pread`` of exactly its span gives."""
    import os
    import random

    import skill_mcp.catalog.cache as cache_module

    cache_dir = tmp_path / "c"
    for n in range(12):
        write_skill(tree, f"extra-{n:02d}")
    cached(tree, cache_dir)
    for window in (1, 300, 1 << 20):
        monkeypatch.setattr(cache_module, "READ_AHEAD", window)
        cache = _cache(tree, cache_dir)
        spans = sorted(cache._old_skills.values())
        assert len(spans) > 12
        fd = os.open(cache.path, os.O_RDONLY)
        try:
            order = [*spans, *reversed(spans), *random.Random(window).sample(spans, len(spans))]
            for span in order:
                assert cache._body(span) == os.pread(fd, span[1], span[0])
        finally:
            os.close(fd)
            cache.close()


def test_a_span_past_the_end_of_the_file_is_refused(tree: Path, tmp_path: Path) -> None:
    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    cache = _cache(tree, cache_dir)
    try:
        size = cache.path.stat().st_size
        with pytest.raises(ValueError):
            cache._body((size - 5, 10))
    finally:
        cache.close()


def test_the_search_key_reads_the_cached_frontmatter_text_without_decoding_it(tree: Path, tmp_path: Path) -> None:
    """The key covers the frontmatter as the cache's JSON text, byte for byte the text a scanned
    record's frontmatter makes, so a warm start's key decodes none of them; any change to the
    frontmatter (here a tag the index takes) is another key (the negative control)."""
    from skill_mcp.catalog.cached import frontmatter_text

    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    warm, fresh = _warm(tree, cache_dir), cold(tree)
    for name, skill in warm.skills.items():
        assert frontmatter_text(skill.frontmatter) == frontmatter_text(fresh.skills[name].frontmatter)
    skills = sorted(warm.skills.values(), key=lambda s: s.name)
    key = current_key(skills)
    assert all(s.frontmatter._value is None for s in skills)
    changed = CachedFrontmatter(
        json.dumps({**dict(skills[0].frontmatter), "tags": ["another"]}, separators=(",", ":")).encode(),
        skills[0].description,
    )
    from dataclasses import replace

    assert current_key([replace(skills[0], frontmatter=changed), *skills[1:]]) != key


@pytest.mark.parametrize(
    "part, text",
    [(5, DAMAGE["not-json"]([])), (5, DAMAGE["one-row-fewer-than-counted"]), (4, FRONTMATTER_DAMAGE["not-json"])],
    ids=["rows-not-json", "rows-fewer", "frontmatter-not-json"],
)
def test_a_skills_list_page_on_a_damaged_entry_goes_the_reference_way(
    tree: Path, tmp_path: Path, part: int, text: object
) -> None:
    """The one-``lstat`` page check (``filetier.known_checked``) meets the lazily decoded parts of
    a cached record: a damaged part is a failed check (None, the record left unchecked), never an
    exception and never a record marked checked; the undamaged neighbour (the control) passes."""
    from skill_mcp.catalog.digest_memo import DigestMemo
    from skill_mcp.catalog.files import file_info
    from skill_mcp.catalog.filetier import known_checked

    cache_dir = tmp_path / "c"
    cached(tree, cache_dir)
    if callable(text):
        text = text(_rows_of(tree, cache_dir, "beta"))
    assert isinstance(text, bytes)
    _damage(tree, cache_dir, "beta", part, text)
    warm = _warm(tree, cache_dir)
    memo = DigestMemo()
    for skill in cold(tree).skills.values():  # every digest known for the files as they are
        for f in skill.files:
            file_info(memo, skill, f)
    beta, alpha = warm.skills["beta"], warm.skills["alpha"]
    assert known_checked(memo, beta) is None
    assert isinstance(beta.files, CachedFiles) and not beta.files.checked
    assert known_checked(memo, alpha) is not None  # the control: an intact record passes
    assert isinstance(alpha.files, CachedFiles) and alpha.files.checked


# What only reading a skill from disk needs: the loader, its YAML readers and checks, the
# workers that share a cold scan.
SCANNER = ("skill_mcp.catalog.skill", "skill_mcp.catalog.parallel_scan", "skill_mcp.catalog.yaml12", "yaml")
_BUILD = """
import json, sys
from pathlib import Path
from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import load_settings
settings = load_settings([sys.argv[1]], {"SKILL_MCP_CACHE_DIR": sys.argv[2]})
catalog = build_catalog(settings, check_files=False)
print(json.dumps([len(catalog.skills), [m for m in sys.argv[3:] if m in sys.modules]]))
"""


def _fresh_build(root: Path, cache_dir: Path) -> tuple[int, list[str]]:
    """A build in a fresh interpreter: how many skills, and which of ``SCANNER`` it imported."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _BUILD, str(root), str(cache_dir), *SCANNER],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    skills, imported = json.loads(out.stdout)
    return skills, imported


def test_a_warm_build_never_imports_the_scanner(tree: Path, tmp_path: Path) -> None:
    """Denial: a build that takes every skill from the cache imports none of the scanner's
    modules (they are a cold scan's cost, not a warm start's first answer). Control: the cold
    build before it, in the same kind of process, imports each of them."""
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    cold_skills, cold_imported = _fresh_build(tree, cache_dir)
    assert cold_skills > 2 and cold_imported == list(SCANNER)
    warm_skills, warm_imported = _fresh_build(tree, cache_dir)
    assert warm_skills == cold_skills and warm_imported == []
    # A skill changed since: that one is read from disk, so the scanner comes in after all.
    (tree / "parent" / "SKILL.md").write_text((tree / "parent" / "SKILL.md").read_text() + "\nmore\n")
    changed_skills, changed_imported = _fresh_build(tree, cache_dir)
    assert changed_skills == cold_skills and "skill_mcp.catalog.skill" in changed_imported
