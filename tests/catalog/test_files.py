"""Reads of a skill's files: only listed files, both path checks, never a stale digest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from skill_mcp.catalog import build_catalog
from skill_mcp.catalog.files import (
    DigestMemo,
    current_size,
    file_info,
    known_info,
    read_body,
    read_skill_file,
    skill_uri,
)
from skill_mcp.config import load_settings
from skill_mcp.errors import SkillMcpError
from skill_mcp.models import Skill
from skill_mcp.reasons import Refusal


@pytest.fixture
def demo(tmp_path: Path) -> Skill:
    s = tmp_path / "demo"
    (s / "ref").mkdir(parents=True)
    (s / "SKILL.md").write_text("---\nname: demo\ndescription: d\n---\n# Demo\nRead ref/a b.md\n")
    (s / "ref" / "a b.md").write_text("alpha")
    (s / "big.bin").write_bytes(b"\0" * 4096)
    (tmp_path / "outside.txt").write_text("secret")
    return build_catalog(load_settings([str(tmp_path)], {})).skills["demo"]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_reads_a_listed_file_and_its_body(demo: Skill) -> None:
    assert read_skill_file(demo, "ref/a b.md", max_bytes=1024) == b"alpha"
    assert read_body(demo) == "# Demo\nRead ref/a b.md\n"


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("../outside.txt", Refusal.INVALID_PATH),
        ("/etc/passwd", Refusal.INVALID_PATH),
        ("ref/../SKILL.md", Refusal.INVALID_PATH),
        ("ref//a b.md", Refusal.INVALID_PATH),
        ("ref\\a b.md", Refusal.INVALID_PATH),
        ("ref/a%20b.md", Refusal.INVALID_PATH),
        ("nope.md", Refusal.NOT_FOUND),
        ("ref", Refusal.NOT_FOUND),
    ],
)
def test_refuses_paths_that_are_not_listed_files(demo: Skill, rel: str, reason: Refusal) -> None:
    with pytest.raises(SkillMcpError) as info:
        read_skill_file(demo, rel, max_bytes=1024)
    assert info.value.reason is reason


def test_size_cap_refuses_before_reading(demo: Skill) -> None:
    with pytest.raises(SkillMcpError) as info:
        read_skill_file(demo, "big.bin", max_bytes=100)
    assert info.value.reason is Refusal.FILE_TOO_LARGE
    assert current_size(demo, "big.bin") == 4096


def test_link_planted_after_the_scan_is_refused_by_the_resolved_check(demo: Skill, tmp_path: Path) -> None:
    target = demo.directory / "ref" / "a b.md"
    target.unlink()
    os.symlink(tmp_path / "outside.txt", target)
    with pytest.raises(SkillMcpError) as info:
        read_skill_file(demo, "ref/a b.md", max_bytes=1024)
    assert info.value.reason is Refusal.OUTSIDE_SKILL
    assert read_skill_file(demo, "SKILL.md", max_bytes=4096).startswith(b"---")  # positive control


def test_digest_follows_the_file_when_it_changes_after_the_scan(demo: Skill) -> None:
    memo = DigestMemo()
    entry = demo.file("ref/a b.md")
    assert entry is not None
    assert file_info(memo, demo, entry).digest == sha(b"alpha")
    path = demo.directory / "ref" / "a b.md"
    path.write_text("changed text")
    os.utime(path, ns=(1, 1))  # a new mtime even on coarse-clock filesystems
    info = file_info(memo, demo, entry)
    assert info.digest == sha(b"changed text")
    assert info.size == len(b"changed text")


def test_uris_put_skill_md_explicitly_and_quote_file_paths(demo: Skill) -> None:
    assert skill_uri(demo) == "skill://demo"
    assert skill_uri(demo, "SKILL.md") == "skill://demo/SKILL.md"
    assert skill_uri(demo, "ref/a b.md") == "skill://demo/ref/a%20b.md"
    # The records carry the same URI in parts, made once at scan time.
    for f in demo.files:
        assert demo.uri_prefix + f.uri_path == skill_uri(demo, f.rel)


def test_a_known_digest_is_reused_only_while_the_entry_is_unchanged(demo: Skill) -> None:
    memo = DigestMemo()
    entry = demo.file("ref/a b.md")
    assert entry is not None
    assert known_info(memo, demo, entry) is None  # nothing verified yet: the full path must run
    first = file_info(memo, demo, entry)
    assert known_info(memo, demo, entry) == first  # positive control: unchanged, reused
    assert memo.known_files(demo) is None  # SKILL.md and big.bin not hashed yet
    for f in demo.files:
        file_info(memo, demo, f)
    assert [f.rel for f, _size, _digest in memo.known_files(demo) or []] == [f.rel for f in demo.files]
    path = demo.directory / "ref" / "a b.md"
    os.utime(path, ns=(5, 5))  # same bytes, another identity
    assert known_info(memo, demo, entry) is None and memo.known_files(demo) is None


def test_a_link_put_in_place_of_a_hashed_file_gets_no_reused_digest(demo: Skill, tmp_path: Path) -> None:
    memo = DigestMemo()
    entry = demo.file("ref/a b.md")
    assert entry is not None
    file_info(memo, demo, entry)
    target = demo.directory / "ref" / "a b.md"
    target.unlink()
    os.symlink(tmp_path / "outside.txt", target)
    assert known_info(memo, demo, entry) is None
    with pytest.raises(SkillMcpError) as info:
        file_info(memo, demo, entry)
    assert info.value.reason is Refusal.OUTSIDE_SKILL


def test_a_known_digest_is_per_skill_and_path_not_per_inode(tmp_path: Path) -> None:
    # The same inode reached through another skill's path is verified for that path first.
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\nbody\n")
    os.link(tmp_path / "one" / "SKILL.md", tmp_path / "two" / "copy.md")
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    one, two = catalog.skills["one"], catalog.skills["two"]
    memo = DigestMemo()
    shared_one, shared_two = one.file("SKILL.md"), two.file("copy.md")
    assert shared_one is not None and shared_two is not None
    file_info(memo, one, shared_one)
    assert known_info(memo, two, shared_two) is None
    assert file_info(memo, two, shared_two).digest == file_info(memo, one, shared_one).digest
