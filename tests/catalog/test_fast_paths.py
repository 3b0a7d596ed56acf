"""The fast paths taken for speed give exactly the answers of the portable ones.

``relpath_problem`` skips the Unicode checks for plain ASCII; ``resolve_inside`` lets the
kernel resolve a path whose last component is not a link. Each is compared with the full
check on the same input, refusals included.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp import paths
from skill_mcp.catalog.frontmatter import FRONTMATTER_MAX_BYTES, FrontmatterError, split
from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal

ASCII_PATHS = st.text(alphabet=st.sampled_from(list("ab./-_%\\\x00\x1f\x7f ~")), max_size=40)


@given(ASCII_PATHS, st.booleans())
def test_ascii_fast_path_agrees_with_the_full_check(rel: str, dash: bool) -> None:
    assert paths.relpath_problem(rel, allow_leading_dash=dash) == paths._full_problem(rel, dash)


def test_ascii_fast_path_refuses_long_segments_and_dot_segments() -> None:
    assert paths.relpath_problem("a/" + "x" * 256) == paths._full_problem("a/" + "x" * 256, True)
    assert paths.relpath_problem("a/../b") is not None
    assert paths.relpath_problem("references/guide.md") is None  # positive control


def _outcome(base: Path, rel: str) -> object:
    try:
        real, st_ = paths.resolve_inside(base, rel)
        return (str(real), st_.st_ino)
    except SkillMcpError as err:
        return err.reason


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    skill = tmp_path / "skill"
    (skill / "refs" / "deep").mkdir(parents=True)
    (skill / "refs" / "deep" / "a.md").write_text("a", encoding="utf-8")
    (skill / "SKILL.md").write_text("s", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("x", encoding="utf-8")
    os.symlink(skill / "refs", skill / "dirlink")  # a directory link that stays inside
    os.symlink(outside, skill / "outlink")  # a directory link that leaves
    os.symlink(skill / "SKILL.md", skill / "filelink")  # a final link inside
    os.symlink(outside / "secret.txt", skill / "escape")  # a final link that leaves
    os.symlink(skill / "nowhere", skill / "dangling")
    os.mkfifo(skill / "fifo")
    return skill


@pytest.mark.parametrize(
    "rel",
    [
        "SKILL.md",
        "refs/deep/a.md",
        "dirlink/deep/a.md",
        "outlink/secret.txt",
        "filelink",
        "escape",
        "dangling",
        "fifo",
        "refs",
        "missing.md",
        "refs/missing",
    ],
)
def test_kernel_resolution_agrees_with_realpath(tree: Path, rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _outcome(tree, rel)
    monkeypatch.setattr(paths, "_kernel_resolve", lambda joined: None)
    assert fast == _outcome(tree, rel)


def test_link_leaving_the_skill_is_refused_on_the_fast_path(tree: Path) -> None:
    with pytest.raises(SkillMcpError) as err:
        paths.resolve_inside(tree, "outlink/secret.txt")
    assert err.value.reason == Refusal.OUTSIDE_SKILL
    assert paths.resolve_inside(tree, "dirlink/deep/a.md")[0] == tree / "refs" / "deep" / "a.md"  # positive control


def test_is_inside_is_a_separator_bounded_prefix() -> None:
    assert paths.is_inside(Path("/a/b"), Path("/a/b"))
    assert paths.is_inside(Path("/a/b"), Path("/a/b/c"))
    assert not paths.is_inside(Path("/a/b"), Path("/a/bc"))
    assert not paths.is_inside(Path("/a/b"), Path("/a"))
    assert paths.is_inside(Path("/"), Path("/x"))


def _reference_split(raw: bytes) -> tuple[str, int, str, int]:
    """``frontmatter.split`` as first written (the whole text cut into lines)."""
    offset = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    text = raw[offset:].decode("utf-8")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip(" \t") != "---":
        raise FrontmatterError("start", 1, 1)
    consumed = len(lines[0].encode("utf-8"))
    yaml_lines: list[str] = []
    for index, line in enumerate(lines[1:], start=2):
        stripped = line.rstrip("\r\n").rstrip(" \t")
        consumed += len(line.encode("utf-8"))
        if stripped in ("---", "..."):
            return "".join(yaml_lines), 2, raw[offset + consumed :].decode("utf-8"), offset + consumed
        if consumed > FRONTMATTER_MAX_BYTES:
            raise FrontmatterError("size", index, 1)
        yaml_lines.append(line.rstrip("\r\n") + "\n")
    raise FrontmatterError("closing", len(lines), 1)


def _split_outcome(fn: object, raw: bytes) -> object:
    try:
        got = fn(raw)  # type: ignore[operator]
    except FrontmatterError as err:
        return ("error", err.line, err.column)
    if isinstance(got, tuple):
        return got
    return (got.frontmatter, got.first_line, got.body, got.body_offset)


LINE = st.sampled_from(["---", "...", "--- ", "name: x", "é" * 300, "x" * 5000, "a: b\r", "", "#"])


@given(
    st.lists(LINE, max_size=40),
    st.sampled_from(["\n", "\r\n", "\u2028"]),
    st.booleans(),
    st.integers(min_value=0, max_value=3),
)
def test_split_reads_only_the_head_yet_agrees_with_the_whole_text_rule(
    lines: list[str], eol: str, bom: bool, pad: int
) -> None:
    text = eol.join(lines) + ("z" * 30000 + eol) * pad
    raw = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    assert _split_outcome(split, raw) == _split_outcome(_reference_split, raw)


def test_split_finds_a_delimiter_past_the_head_by_falling_back() -> None:
    raw = ("---\nname: x\n" + "# " + "c" * 70000 + "\n---\nbody\n").encode()
    with pytest.raises(FrontmatterError):  # over 64 KiB either way
        split(raw)
    ok = ("---\nname: x\n---\n" + "b" * 100000).encode()
    assert split(ok).body == "b" * 100000  # positive control


def _pinned_outcome(base: Path, rel: str) -> object:
    try:
        pinned = paths.pin_inside(str(base), rel)
    except SkillMcpError as err:
        return err.reason
    if pinned is None:
        return _outcome(base, rel)  # the caller's fallback: the portable path decides
    fd, st_ = pinned
    try:
        return (os.readlink(f"/proc/self/fd/{fd}"), st_.st_ino)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "rel",
    [
        "SKILL.md",
        "refs/deep/a.md",
        "dirlink/deep/a.md",
        "outlink/secret.txt",
        "filelink",
        "escape",
        "dangling",
        "fifo",
        "refs",
        "missing.md",
        "refs/missing",
        "../outside/secret.txt",
        "refs//deep/a.md",
        "/etc/passwd",
    ],
)
def test_pinning_agrees_with_resolve_inside(tree: Path, rel: str) -> None:
    assert _pinned_outcome(tree, rel) == _outcome(tree, rel)


def test_a_pinned_file_is_read_even_if_its_path_is_swapped_for_a_link_out(tree: Path) -> None:
    pinned = paths.pin_inside(str(tree), "refs/deep/a.md")
    assert pinned is not None
    fd, st_ = pinned
    try:
        (tree / "refs" / "deep" / "a.md").rename(tree / "refs" / "deep" / "moved.md")
        os.symlink(tree.parent / "outside" / "secret.txt", tree / "refs" / "deep" / "a.md")
        readable = paths.open_pinned(fd, st_, "refs/deep/a.md")
        try:
            assert os.read(readable, 100) == b"a"  # the checked inode, never the link's target
        finally:
            os.close(readable)
    finally:
        os.close(fd)
    with pytest.raises(SkillMcpError) as err:  # and a fresh resolution refuses the link
        paths.resolve_inside(tree, "refs/deep/a.md")
    assert err.value.reason == Refusal.OUTSIDE_SKILL


@pytest.mark.parametrize(
    ("root", "real"),
    [
        ("/srv/skills", "/srv/skills/alpha"),
        ("/srv/skills", "/srv/skills/deep/beta"),
        ("/srv/skills", "/srv/skillset/gamma"),  # a sibling sharing the root's text as a prefix
        ("/srv/skills", "/srv/skills"),
        ("/", "/alpha"),
        ("/srv/skills", "/elsewhere/delta"),
        ("/srv/skills", "/srv/skills/a b é"),
    ],
)
def test_path_under_is_the_path_of_the_text(root: str, real: str) -> None:
    made = paths.path_under(Path(root), root, real)
    reference = Path(real)
    assert (made, str(made), made.name, made.parts, made.parent) == (
        reference,
        str(reference),
        reference.name,
        reference.parts,
        reference.parent,
    )
    assert hash(made) == hash(reference)
