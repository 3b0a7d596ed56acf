"""The persistent catalog cache is never wrong: every build with it equals a build without it.

Each test changes the tree the way a person or a tool does (edit, add, remove, rename, a
same-size rewrite with the mtime put back, a rewrite inside one timestamp tick) or damages the
cache file, then checks that the cached build equals a cold build of the same tree, and that
the cache was actually used for what did not change (the positive control).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.catalog.cache import CatalogCache, cache_file
from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from tests.helpers import write_skill
from tests.integration.harness import build_tree

FAR_FUTURE_NS = 2**62  # an injected clock for which nothing on disk is recent


def _settings(root: Path, cache_dir: Path | None):
    env = {"SKILL_MCP_CACHE_DIR": str(cache_dir)} if cache_dir else {"SKILL_MCP_CACHE": "off"}
    return load_settings([str(root)], env)


def _cache(root: Path, cache_dir: Path, clock: int | None = FAR_FUTURE_NS) -> CatalogCache:
    path = cache_file(cache_dir, [os.path.realpath(root)])
    return CatalogCache(path, now_ns=None if clock is None else (lambda _d: clock))


def cached(root: Path, cache_dir: Path, clock: int | None = FAR_FUTURE_NS) -> tuple[Catalog, CatalogCache]:
    cache = _cache(root, cache_dir, clock)
    return build_catalog(_settings(root, cache_dir), cache=cache), cache


def cold(root: Path) -> Catalog:
    return build_catalog(_settings(root, None))


def same(a: Catalog, b: Catalog) -> None:
    assert a.skills == b.skills
    assert sorted(a.problems, key=repr) == sorted(b.problems, key=repr)
    assert a.packs == b.packs


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = build_tree(tmp_path / "skills")
    write_skill(root, "parent")
    write_skill(root / "parent", "child")  # a nested skill, published flat
    return root


def test_a_warm_build_equals_a_cold_build_and_reuses_every_skill(tree: Path, tmp_path: Path) -> None:
    first, c1 = cached(tree, tmp_path / "c")
    assert c1.reused == 0 and c1.loaded > 0
    second, c2 = cached(tree, tmp_path / "c")
    same(second, cold(tree))
    same(first, second)
    assert c2.loaded == 0 and c2.reused == c1.loaded


@pytest.mark.parametrize(
    "change",
    [
        "edit",
        "add-file",
        "remove-file",
        "rename-file",
        "add-skill",
        "remove-skill",
        "rename-skill",
        "break-frontmatter",
        "add-nested",
    ],
)
def test_every_change_to_the_tree_is_seen_and_the_rest_is_reused(tree: Path, tmp_path: Path, change: str) -> None:
    cached(tree, tmp_path / "c")
    beta = tree / "beta"
    if change == "edit":
        (beta / "SKILL.md").write_text(
            "---\nname: beta\ndescription: Beta, now changed.\n---\nNew.\n", encoding="utf-8"
        )
    elif change == "add-file":
        (beta / "notes.md").write_text("notes\n", encoding="utf-8")
    elif change == "remove-file":
        (tree / "alpha" / "references" / "deep" / "notes.txt").unlink()
    elif change == "rename-file":
        (tree / "alpha" / "references" / "guide.md").rename(tree / "alpha" / "references" / "guide2.md")
    elif change == "add-skill":
        write_skill(tree, "delta")
    elif change == "remove-skill":
        shutil.rmtree(beta)
    elif change == "rename-skill":
        beta.rename(tree / "beta-two")
    elif change == "break-frontmatter":
        (beta / "SKILL.md").write_text("---\nname: beta\ndescription: [unclosed\n---\n", encoding="utf-8")
    elif change == "add-nested":
        write_skill(tree / "alpha" / "references", "inner")
    after, cache = cached(tree, tmp_path / "c")
    same(after, cold(tree))
    assert cache.reused >= 3  # gamma, bulk, broken, parent or child were untouched
    assert cache.loaded >= (0 if change == "remove-skill" else 1)


def test_a_same_size_rewrite_with_the_mtime_put_back_is_caught_by_ctime(tree: Path, tmp_path: Path) -> None:
    cached(tree, tmp_path / "c")
    md = tree / "beta" / "SKILL.md"
    before = md.stat()
    text = md.read_text(encoding="utf-8")
    new = text.replace("Beta answers questions.", "Beta answers QUESTIONS.")
    assert len(new) == len(text)
    with open(md, "r+", encoding="utf-8") as handle:  # in place: same inode, same size
        handle.write(new)
    os.utime(md, ns=(before.st_atime_ns, before.st_mtime_ns))
    now = md.stat()
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    after, cache = cached(tree, tmp_path / "c")
    assert after.skills["beta"].description == "Beta answers QUESTIONS."
    same(after, cold(tree))
    assert cache.loaded == 1


def test_a_skill_changed_in_the_tick_its_scan_began_is_never_written(tmp_path: Path) -> None:
    """A rewrite in the same timestamp tick as the read would leave every stamp as it was, so a
    result whose files changed at or after the moment the scan began is not written at all."""
    root = tmp_path / "skills"
    write_skill(root, "fresh")
    changed = (root / "fresh" / "SKILL.md").stat().st_ctime_ns
    cached(root, tmp_path / "c", clock=changed)  # the scan began in the tick of the last change
    _after, c2 = cached(root, tmp_path / "c")
    assert c2.reused == 0 and c2.loaded == 1
    # Positive control: a scan that began a second after the change writes the entry.
    cached(root, tmp_path / "c2", clock=changed + 1_000_000_000)
    _again, c3 = cached(root, tmp_path / "c2")
    assert c3.reused == 1


def test_with_the_real_clock_a_just_written_tree_is_read_fresh(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "fresh")
    cached(root, tmp_path / "c", clock=None)
    md = root / "fresh" / "SKILL.md"
    st = md.stat()
    text = md.read_text(encoding="utf-8").replace("helps", "HELPS")
    with open(md, "r+", encoding="utf-8") as handle:
        handle.write(text)
    os.utime(md, ns=(st.st_atime_ns, st.st_mtime_ns))
    after, _c2 = cached(root, tmp_path / "c", clock=None)
    assert "HELPS" in after.skills["fresh"].description


@pytest.mark.parametrize(
    "damage", ["flip-a-byte", "truncate", "garbage", "empty", "other-version", "world-writable", "a-symlink"]
)
def test_a_damaged_or_foreign_cache_file_is_rebuilt_never_served(tree: Path, tmp_path: Path, damage: str) -> None:
    cached(tree, tmp_path / "c")
    path = _cache(tree, tmp_path / "c").path
    data = path.read_bytes()
    # Make the cache lie about beta, so serving it would show: a valid file with another description.
    assert b"Beta answers questions." in data
    if damage == "flip-a-byte":
        path.write_bytes(data.replace(b"Beta answers questions.", b"Beta answers question!."))
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(4096))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "other-version":
        head, _, rest = data.partition(b"\n")
        header = json.loads(head)
        header["version"] = "0.0.0-other"
        path.write_bytes(json.dumps(header).encode() + b"\n" + rest)
    elif damage == "world-writable":
        path.chmod(0o666)
    elif damage == "a-symlink":
        target = tmp_path / "elsewhere"
        target.write_bytes(data)
        path.unlink()
        path.symlink_to(target)
    after, cache = cached(tree, tmp_path / "c")
    same(after, cold(tree))
    assert cache.reused == 0
    # ...and the next build has a good file again.
    _again, fixed = cached(tree, tmp_path / "c")
    assert fixed.reused == cache.loaded and fixed.loaded == 0


def test_a_refusal_is_cached_only_while_its_file_is_unchanged(tmp_path: Path) -> None:
    """A SKILL.md over the size limit, cut down in place (same inode, same directory): the
    cached refusal must not outlive the change."""
    root = tmp_path / "skills"
    (root / "long").mkdir(parents=True)
    md = root / "long" / "SKILL.md"
    md.write_text("---\nname: long\ndescription: Long.\n---\n" + "x" * (1024 * 1024), encoding="utf-8")
    first, _ = cached(root, tmp_path / "c")
    assert "long" not in first.skills
    _again, c2 = cached(root, tmp_path / "c")
    assert c2.reused == 1  # the refusal itself was cached
    with open(md, "r+b") as handle:
        handle.truncate(60)
    after, _ = cached(root, tmp_path / "c")
    assert "long" in after.skills
    same(after, cold(root))


def test_a_forged_entry_with_a_good_checksum_still_fails_its_stamps(tree: Path, tmp_path: Path) -> None:
    """The stamps, not the checksum, decide: an entry whose files changed is reloaded."""
    cached(tree, tmp_path / "c")
    (tree / "beta" / "SKILL.md").write_text("---\nname: beta\ndescription: Rewritten.\n---\n", encoding="utf-8")
    after, cache = cached(tree, tmp_path / "c")
    assert after.skills["beta"].description == "Rewritten."
    assert cache.loaded == 1


def test_a_link_in_a_skill_keeps_it_out_of_the_cache(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "linked")
    (root / "linked" / "real.md").write_text("one\n", encoding="utf-8")
    (root / "linked" / "alias.md").symlink_to("real.md")
    cached(root, tmp_path / "c")
    _after, cache = cached(root, tmp_path / "c")
    assert cache.reused == 0 and cache.loaded == 1


def test_pack_digests_are_reused_only_while_the_pinned_files_are_unchanged(tmp_path: Path) -> None:
    from tests.catalog.pack_trees import lock, make_pack

    root = make_pack(tmp_path / "pk")
    assert lock(root).returncode == 0
    first, _ = cached(root, tmp_path / "c")
    assert set(first.skills) == {"alpha", "beta"}
    _second, c2 = cached(root, tmp_path / "c")
    assert c2.reused == 2
    script = root / "alpha" / "scripts" / "run.py"
    script.write_text("print('HI')\n", encoding="utf-8")  # same size, different bytes
    third, _c3 = cached(root, tmp_path / "c")
    same(third, cold(root))
    assert "alpha" not in third.skills
    assert any(p.reason == "digest-mismatch" and p.skill == "alpha" for p in third.problems)


def test_the_cache_is_off_when_asked_and_its_directory_follows_xdg(tmp_path: Path) -> None:
    assert load_settings([], {"SKILL_MCP_CACHE": "off", "HOME": "/h"}).cache_dir is None
    assert load_settings([], {"HOME": "/h"}).cache_dir == Path("/h/.cache/skill-mcp")
    assert load_settings([], {"HOME": "/h", "XDG_CACHE_HOME": "/x"}).cache_dir == Path("/x/skill-mcp")
    assert load_settings([], {"HOME": "/h", "XDG_CACHE_HOME": "rel"}).cache_dir == Path("/h/.cache/skill-mcp")
    assert load_settings([], {"SKILL_MCP_CACHE_DIR": str(tmp_path)}).cache_dir == tmp_path
    assert load_settings([], {}).cache_dir is None


def test_other_rules_mean_another_cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import skill_mcp.catalog.cache as cache_module

    here = cache_file(tmp_path, ["/r"])
    assert here == cache_file(tmp_path, ["/r"]) and here != cache_file(tmp_path, ["/other"])
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "changed rules")
    assert cache_file(tmp_path, ["/r"]) != here


def _rechecksummed(data: bytes) -> bytes:
    """``data`` (its lines edited) with its index and its header's checksum made right again: a
    forgery the checksum cannot see, and whose index points at the edited lines."""
    import hashlib

    head, _, rest = data.partition(b"\n")
    header = json.loads(head)
    at = len(head) + 1
    skills: list[Any] = []
    digests: list[Any] = []
    lines = b""
    for line in rest.split(b"\n"):
        if not line or line.startswith(b"I\t"):
            continue
        kind, key, body = line.split(b"\t", 2)
        if kind == b"S":
            skills.append([json.loads(key), at + len(kind) + len(key) + 2, len(body)])
        else:
            digests.append([json.loads(key), json.loads(body)])
        lines += line + b"\n"
        at += len(line) + 1
    block = json.dumps({"skills": skills, "digests": digests}).encode()
    rest = lines + b"I\t" + block + b"\n"
    header["index"] = [at + 2, len(block)]
    header["sha256"] = hashlib.sha256(rest).hexdigest()
    return json.dumps(header).encode().ljust(len(head)) + b"\n" + rest


def test_a_warm_skill_makes_its_file_records_on_first_use_and_equals_a_cold_one(tree: Path, tmp_path: Path) -> None:
    from skill_mcp.catalog.cached import CachedFiles

    cached(tree, tmp_path / "c")
    warm, _ = cached(tree, tmp_path / "c")
    files = warm.skills["alpha"].files
    assert isinstance(files, CachedFiles)
    fresh = cold(tree).skills["alpha"].files
    assert len(files) == len(fresh) > 2  # a listing's count, before any record is made
    assert files == fresh and tuple(files) == fresh and files[0] == fresh[0] and hash(files) == hash(fresh)
    assert warm.skills["alpha"].file("SKILL.md") == cold(tree).skills["alpha"].file("SKILL.md")


def test_a_file_row_of_the_wrong_shape_is_a_miss_when_read_not_an_error_later(tree: Path, tmp_path: Path) -> None:
    """Records are made late, and their rows are parsed and checked when the file tier first reads
    them (a build that checks both tiers, as here, reads them at once): a row this code never
    writes (forged under a good checksum) reloads that skill; the others are reused."""
    cached(tree, tmp_path / "c")
    path = _cache(tree, tmp_path / "c").path
    data = path.read_bytes()
    line = next(x for x in data.split(b"\n") if b'"name":"beta"' in x)
    kind, real, head, stamps, frontmatter, body = line.split(b"\t", 5)
    rows = json.loads(body)
    rows[0] = [rows[0][0], "not-a-size"]
    forged = b"\t".join((kind, real, head, stamps, frontmatter, json.dumps(rows).encode()))
    path.write_bytes(_rechecksummed(data.replace(line, forged)))
    after, cache = cached(tree, tmp_path / "c")
    same(after, cold(tree))
    assert cache.loaded == 1 and cache.reused >= 3


def test_a_new_release_removes_what_older_rules_left_for_the_same_roots(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache file is megabytes at thousands of skills: an upgrade must not leave one behind per
    release. Another set of roots' file, and another user's, are left alone (the controls)."""
    import skill_mcp.catalog.cache as cache_module

    cache_dir = tmp_path / "c"
    _first, c1 = cached(tree, cache_dir)
    old = c1.path
    assert old.exists()
    other_roots = cache_file(cache_dir, ["/elsewhere"])
    other_roots.write_bytes(b"another set of roots")
    # Another user's file under the same roots' name (a shared cache directory): not ours to remove.
    theirs = old.with_name(old.name.rsplit("-", 1)[0] + "-theirs.v1")
    theirs.write_bytes(b"another user's cache")
    owner_changed = os.geteuid() == 0
    if owner_changed:
        os.chown(theirs, 65534, 65534)
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "the next release's rules")
    after, c2 = cached(tree, cache_dir)
    same(after, cold(tree))
    assert c2.path != old and c2.path.exists() and c2.reused == 0  # other rules: nothing reused
    assert not old.exists()
    assert other_roots.exists()
    assert theirs.exists() is owner_changed  # kept when it is someone else's; ours is superseded


def test_entries_of_the_previous_format_under_a_good_header_are_each_a_miss(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose entries hold the format-3 listing (an object), under this format's header
    and a good checksum: no entry is read by position, each skill is loaded from disk, and the
    file is rewritten in this format (the next build reuses every skill)."""
    from skill_mcp.catalog import cache as cache_module
    from tests.catalog import reference_codec

    monkeypatch.setattr(cache_module, "encode_loaded", reference_codec.encode_loaded)
    _old, written = cached(tree, tmp_path / "c")
    monkeypatch.undo()
    assert written.loaded > 0
    after, cache = cached(tree, tmp_path / "c")
    same(after, cold(tree))
    assert cache.reused == 0 and cache.loaded == written.loaded
    _again, fixed = cached(tree, tmp_path / "c")
    assert fixed.reused == written.loaded and fixed.loaded == 0


def _with_index(data: bytes, edit: Any) -> bytes:
    """``data`` with its index block (the last line) as ``edit`` leaves it, under a good checksum
    and a header that points at it: a forgery only the index's own checks can see."""
    import hashlib

    head, _, rest = data.partition(b"\n")
    header = json.loads(head)
    start, _length = header["index"]
    block = json.loads(data[start : start + _length])
    edited = edit(header, block)
    text = json.dumps(edited).encode()
    rest = data[len(head) + 1 : start] + text + b"\n"
    header["index"] = [start, len(text)] if "index" in header else None
    if header["index"] is None:
        del header["index"]
    header["sha256"] = hashlib.sha256(rest).hexdigest()
    return json.dumps(header).encode().ljust(len(head)) + b"\n" + rest


def _swap_two(_header: dict[str, Any], block: dict[str, Any]) -> Any:
    rows = block["skills"]
    rows[0][1:], rows[1][1:] = rows[1][1:], rows[0][1:]
    return block


def _no_index(header: dict[str, Any], block: dict[str, Any]) -> Any:
    del header["index"]
    return block


INDEX_FORGERIES: dict[str, tuple[Any, int | None]] = {
    # (the edit, how many skills are then loaded from disk: None for the whole file discarded)
    "two-spans-swapped": (_swap_two, 2),
    "a-span-past-the-entries": (lambda _h, b: {**b, "skills": [[b["skills"][0][0], 10**9, 5], *b["skills"][1:]]}, None),
    "a-row-of-another-shape": (lambda _h, b: {**b, "skills": [b["skills"][0][:2], *b["skills"][1:]]}, None),
    "not-a-mapping": (lambda _h, b: [b], None),
    "no-index-in-the-header": (_no_index, None),
}


@pytest.mark.parametrize("forgery", sorted(INDEX_FORGERIES))
def test_a_forged_index_under_a_good_checksum_costs_its_entries_or_the_file_never_a_wrong_answer(
    tree: Path, tmp_path: Path, forgery: str
) -> None:
    _first, written = cached(tree, tmp_path / "c")
    path = _cache(tree, tmp_path / "c").path
    edit, misses = INDEX_FORGERIES[forgery]
    path.write_bytes(_with_index(path.read_bytes(), edit))
    after, cache = cached(tree, tmp_path / "c")
    same(after, cold(tree))
    if misses is None:
        assert cache.held == 0 and cache.reused == 0 and cache.loaded == written.loaded
    else:
        assert cache.loaded == misses and cache.reused == written.loaded - misses


DEEP = b"[" * 100_000 + b"]" * 100_000  # JSON nested past the interpreter's recursion limit


def test_json_nested_past_the_recursion_limit_is_a_miss_never_an_error(tree: Path, tmp_path: Path) -> None:
    """Under a good checksum: a listing so nested that decoding it overflows the recursion limit
    costs its skill, and so do directory stamps so nested (no scan helper here: the build decodes
    them itself); file rows so nested fail that skill's file tier (read from disk again); an
    index so nested costs the file."""
    cached(tree, tmp_path / "c")
    path = _cache(tree, tmp_path / "c").path
    # A line is: kind, the real path, the listing, the directories' stamps, the frontmatter, the
    # file rows. The rows are parsed by the file tier, which this build checks too.
    for part in (2, 3, 5):
        data = path.read_bytes()
        line = next(x for x in data.split(b"\n") if b'"name":"beta"' in x)
        parts = line.split(b"\t", 5)
        parts[part] = DEEP
        path.write_bytes(_rechecksummed(data.replace(line, b"\t".join(parts))))
        after, cache = cached(tree, tmp_path / "c")
        same(after, cold(tree))
        assert cache.loaded == 1 and cache.reused >= 3, part

    data = path.read_bytes()
    head, _, _rest = data.partition(b"\n")
    start, length = json.loads(head)["index"]
    forged = data[:start] + DEEP + data[start + length :]
    header = json.loads(head)
    header["index"] = [start, len(DEEP)]
    path.write_bytes(_rechecksummed_raw(json.dumps(header).encode().ljust(len(head)) + b"\n" + forged[len(head) + 1 :]))
    after, cache = cached(tree, tmp_path / "c")
    same(after, cold(tree))
    assert cache.held == 0 and cache.reused == 0


def _rechecksummed_raw(data: bytes) -> bytes:
    """``data`` with only its header's checksum made right (its index left as it is)."""
    import hashlib

    head, _, rest = data.partition(b"\n")
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(rest).hexdigest()
    return json.dumps(header).encode().ljust(len(head)) + b"\n" + rest
