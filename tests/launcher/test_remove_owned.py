"""``isolation.remove_owned``: everything the script uid owns below a shared place goes, at any
depth, by descriptor; other owners' files and link targets stay; a place it cannot fully search
is reported, never called clean. No Docker: a child as ``nobody`` on a private directory."""

from __future__ import annotations

import encodings.ascii  # noqa: F401 - imported before the child, as nobody, could not read this Python's files
import os
import pwd
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skill_mcp import trees
from skill_mcp_launcher import isolation

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the walk runs as nobody, dropped from root")
NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def place() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="skill-mcp-owned-"))
    path.chmod(0o1777)  # like /tmp
    yield path
    trees.remove_tree(str(path))


def _as_nobody(fn: Callable[[], None]) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 2
        try:
            os.setgroups([])
            os.setresgid(NOBODY.pw_gid, NOBODY.pw_gid, NOBODY.pw_gid)
            os.setresuid(NOBODY.pw_uid, NOBODY.pw_uid, NOBODY.pw_uid)
            fn()
            code = 0
        except trees.NotRemoved:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _nobodys(path: Path, *, text: str = "x") -> Path:
    path.write_text(text)
    os.lchown(path, NOBODY.pw_uid, NOBODY.pw_gid)
    return path


def _foreign_chain(top: Path, levels: int) -> Path:
    """Directories of root, world-writable like /tmp, nested ``levels`` deep (by descriptor)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("f", 0o777, dir_fd=fd)
        os.chmod("f", 0o1777, dir_fd=fd)
        new = os.open("f", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = new
    return Path(f"/proc/self/fd/{fd}")  # the caller closes it through _close


def test_script_cannot_hide_its_files_in_other_owners_directories(place: Path) -> None:
    keep = place / "roots-file"
    keep.write_text("root's")
    elsewhere = Path(tempfile.mkdtemp(prefix="skill-mcp-elsewhere-"))
    try:
        # The uid's own directory outside the place, which a followed link would empty.
        target = elsewhere / "theirs"
        target.mkdir()
        os.chown(target, NOBODY.pw_uid, NOBODY.pw_gid)
        _nobodys(target / "file")
        bottom = _foreign_chain(place, 5)
        fd = int(bottom.name)
        try:
            os.mkdir("mine", dir_fd=fd)
            os.chown("mine", NOBODY.pw_uid, NOBODY.pw_gid, dir_fd=fd)
            os.symlink(str(target), "link", dir_fd=fd)
            os.chown("link", NOBODY.pw_uid, NOBODY.pw_gid, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)
        elsewhere.chmod(0o755)
        assert _as_nobody(lambda: isolation.remove_owned(str(place), NOBODY.pw_uid)) == 0
        left = [str(p) for p in place.rglob("*") if p.lstat().st_uid == NOBODY.pw_uid]
        assert left == []
        assert (target / "file").read_text() == "x"  # the link went, never what it named
        assert keep.read_text() == "root's"  # the control: other owners' files stay
        assert (place / "f" / "f" / "f" / "f" / "f").is_dir()  # and their directories
    finally:
        trees.remove_tree(str(elsewhere))


def test_a_place_nested_deeper_than_the_bound_is_reported_not_called_clean(place: Path) -> None:
    bottom = _foreign_chain(place, isolation.MAX_FOREIGN_DEPTH + 5)
    fd = int(bottom.name)
    try:
        with open(os.open("hidden", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as fh:
            fh.write("x")
        os.chown("hidden", NOBODY.pw_uid, NOBODY.pw_gid, dir_fd=fd)
    finally:
        os.close(fd)
    assert _as_nobody(lambda: isolation.remove_owned(str(place), NOBODY.pw_uid)) == 1
    # Positive control: within the bound the same search removes it.
    shallow = Path(tempfile.mkdtemp(prefix="skill-mcp-owned-"))
    try:
        shallow.chmod(0o1777)
        inner = _foreign_chain(shallow, 3)
        fd = int(inner.name)
        try:
            os.close(os.open("hidden", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
            os.chown("hidden", NOBODY.pw_uid, NOBODY.pw_gid, dir_fd=fd)
        finally:
            os.close(fd)
        assert _as_nobody(lambda: isolation.remove_owned(str(shallow), NOBODY.pw_uid)) == 0
    finally:
        trees.remove_tree(str(shallow))
