"""``skill_mcp.trees``: a script's tree is removed whatever its shape, links are never followed, and
what cannot be removed is reported, never passed over in silence."""

from __future__ import annotations

import gc
import os
import pwd
import resource
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skill_mcp import trees


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory ``nobody`` can reach (pytest's own base is root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="skill-mcp-trees-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        trees.remove_tree(str(path))


def _chain(top: Path, depth: int, mode: int | None = None) -> Path:
    """A chain of ``depth`` nested directories below ``top``, made by descriptor (a path of that
    depth is longer than PATH_MAX); returns ``top``."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(depth):
            os.mkdir("d", dir_fd=fd)
            new = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = new
            if i % 100 == 0:
                with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as fh:
                    fh.write("x")
            if mode is not None and i == depth - 1:
                os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return top


def _open_fds() -> set[str]:
    """This process's open descriptors. Collected first: a file an earlier test left to the
    garbage collector would otherwise close in the middle of a count."""
    gc.collect()
    return set(os.listdir("/proc/self/fd"))


def _as_nobody(tmp_path: Path, fn: Callable[[], None]) -> int:
    """Run ``fn`` in a child that has become ``nobody`` (the tests run as root here, and the locked
    directory cases only mean something for a caller without root's override); its exit code:
    0 removed, 1 ``NotRemoved``, 2 anything else."""
    nobody = pwd.getpwnam("nobody")
    stack = [str(tmp_path)]
    while stack:  # os.walk recurses, and these trees are deeper than the recursion limit
        path = stack.pop()
        os.lchown(path, nobody.pw_uid, nobody.pw_gid)
        if os.path.isdir(path) and not os.path.islink(path):
            stack.extend(e.path for e in os.scandir(path))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 2
        try:
            os.setgroups([])
            os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
            os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)
            fn()
            code = 0
        except trees.NotRemoved:
            code = 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.slow
def test_a_tree_1100_levels_deep_is_removed_with_few_descriptors(base: Path) -> None:
    tmp_path = base
    deep = tmp_path / "deep"
    deep.mkdir()
    _chain(deep, 1100)
    before = _open_fds()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Far fewer descriptors than levels: the walk hoists instead of holding one per level.
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(before) + trees.MAX_OPEN + 16, hard))
    try:
        trees.remove_tree(str(deep))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert not deep.exists()
    assert _open_fds() - before == set()  # nothing leaked (a descriptor another thread closed is not the walk's)
    assert sorted(os.listdir(tmp_path)) == []  # and nothing was hoisted out of it


@pytest.mark.slow
def test_a_deep_tree_is_removed_as_its_owner_even_when_locked(base: Path) -> None:
    tmp_path = base
    run = tmp_path / "run"
    run.mkdir()
    _chain(run, 1100, mode=0)
    # The deepest level is locked (mode 0), and so is a wide one near the top.
    (run / "wide").mkdir()
    for i in range(200):
        (run / "wide" / f"f{i}").write_text("x")
    (run / "wide").chmod(0)
    (run / "noread").mkdir()
    (run / "noread" / "f").write_text("x")
    (run / "noread").chmod(0o300)
    assert _as_nobody(tmp_path, lambda: trees.remove_tree(str(run))) == 0
    assert not run.exists()


def test_script_cannot_make_removal_follow_a_link_out_of_its_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("precious")
    run = tmp_path / "run"
    (run / "a").mkdir(parents=True)
    (run / "a" / "to-dir").symlink_to(outside)
    (run / "a" / "to-file").symlink_to(outside / "keep")
    (run / "dangling").symlink_to(tmp_path / "nothing")
    os.mkfifo(run / "fifo")
    trees.remove_tree(str(run))
    assert not run.exists()
    assert (outside / "keep").read_text() == "precious"  # the control: the link target is intact


def test_script_cannot_hide_a_tree_behind_a_link_at_its_top(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("precious")
    link = tmp_path / "run"
    link.symlink_to(outside)
    trees.remove_tree(str(link))  # the link goes, never what it names
    assert not link.is_symlink() and (outside / "keep").exists()


def test_empty_dir_keeps_the_directory(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "x" / "y").mkdir(parents=True)
    (run / "f").write_text("x")
    trees.empty_dir(str(run))
    assert run.is_dir() and list(run.iterdir()) == []


def test_a_missing_tree_is_gone_already(tmp_path: Path) -> None:
    trees.remove_tree(str(tmp_path / "never"))
    trees.empty_dir(str(tmp_path / "never"))


def test_what_cannot_be_removed_is_reported_not_passed_over(base: Path) -> None:
    tmp_path = base
    # A directory of another owner, locked: the caller (nobody) cannot give its bits back.
    run = tmp_path / "run"
    (run / "theirs").mkdir(parents=True)
    os.chown(tmp_path, pwd.getpwnam("nobody").pw_uid, -1)
    (run / "theirs" / "f").write_text("x")
    (run / "mine").write_text("x")
    nobody = pwd.getpwnam("nobody")
    os.chown(run, nobody.pw_uid, nobody.pw_gid)
    os.chown(run / "mine", nobody.pw_uid, nobody.pw_gid)
    (run / "theirs").chmod(0o500)  # root's, read-only: nobody may list it, never empty it
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)
        try:
            trees.remove_tree(str(run))
        except trees.NotRemoved as exc:
            os._exit(10 + min(exc.left, 50))
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 11  # one entry left, and said so
    assert (run / "theirs" / "f").exists() and not (run / "mine").exists()  # the rest still went


@pytest.mark.slow
def test_many_files_and_a_deep_tree_together(base: Path) -> None:
    tmp_path = base
    run = tmp_path / "run"
    run.mkdir()
    for i in range(20_000):
        (run / f"f{i}").touch()
    _chain(run, 1100)
    trees.remove_tree(str(run))
    assert not run.exists()


def test_refuses_to_remove_a_path_without_a_name() -> None:
    with pytest.raises(ValueError, match="not a removable path"):
        trees.remove_tree("/")


# A random tree: each node is a file, a FIFO, a link (inside, outside, dangling) or a directory
# (perhaps locked) with children.
_leaf = st.sampled_from(["file", "fifo", "link-out-dir", "link-out-file", "link-in", "dangling"])
_tree = st.recursive(
    _leaf,
    lambda kids: st.tuples(st.sampled_from([0o700, 0o000, 0o300, 0o500]), st.lists(kids, max_size=4)),
    max_leaves=30,
)


def _build(at: Path, node: object, outside: Path, top: Path) -> None:
    if isinstance(node, str):
        if node == "file":
            at.write_text("x")
        elif node == "fifo":
            os.mkfifo(at)
        elif node == "link-out-dir":
            at.symlink_to(outside)
        elif node == "link-out-file":
            at.symlink_to(outside / "keep")
        elif node == "link-in":
            at.symlink_to(top)
        else:
            at.symlink_to(outside / "missing")
        return
    assert isinstance(node, tuple)
    mode, kids = node
    at.mkdir()
    for i, kid in enumerate(kids):
        _build(at / f"n{i}", kid, outside, top)
    at.chmod(mode)


# 40, whatever the profile: each example builds and removes a tree on disk through a child process.
@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(shape=_tree, depth=st.integers(min_value=0, max_value=3))
def test_property_any_tree_is_removed_and_nothing_outside_it_is_touched(shape: object, depth: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-trees-"))
    base.chmod(0o755)
    try:
        _removed_alone(base, shape, depth)
    finally:
        trees.remove_tree(str(base))


def _removed_alone(base: Path, shape: object, depth: int) -> None:
    outside = base / "outside"
    outside.mkdir()
    (outside / "keep").write_text("precious")
    (outside / "sub").mkdir()
    run = base / "run"
    holder = run
    run.mkdir()
    for _ in range(depth):  # the random shape sits below a few ordinary levels
        holder = holder / "lvl"
        holder.mkdir()
    _build(holder / "x", shape, outside, run)
    outside_before = sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))
    # Everything is nobody's, the link targets too: a removal that followed a link could delete them.
    assert _as_nobody(base, lambda: trees.remove_tree(str(run))) == 0
    assert not os.path.lexists(run)
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == outside_before
    assert (outside / "keep").read_text() == "precious"
    assert stat.S_IMODE(os.stat(outside).st_mode) != 0
