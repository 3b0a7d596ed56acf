"""``runner.rundirs.remove_stale`` removes only this tool's run directories whose server is gone:
by prefix, by owner, never through a link, never a live server's."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from skill_mcp.runner import rundirs


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _dir(parent: Path, name: str) -> Path:
    path = parent / name
    path.mkdir()
    (path / "left").write_text("x", encoding="utf-8")
    return path


def test_only_run_directories_of_gone_servers_owned_by_us_are_removed(tmp_path: Path) -> None:
    me = frozenset({os.geteuid()})
    dead = _dir(tmp_path, f"skill-mcp-run-{_dead_pid()}-abc")
    older = _dir(tmp_path, "skill-mcp-run-q1w2e3r4")  # an older server's name, no pid in it
    live = _dir(tmp_path, f"skill-mcp-run-{os.getpid()}-abc")  # this process: a live server
    other_prefix = _dir(tmp_path, "skill-mcp-fence-x")
    target = _dir(tmp_path, "elsewhere")
    (tmp_path / "skill-mcp-run-link").symlink_to(target)
    (tmp_path / "skill-mcp-run-file").write_text("x", encoding="utf-8")
    removed = rundirs.remove_stale(str(tmp_path), me)
    assert sorted(removed) == sorted([str(dead), str(older)])
    assert not dead.exists() and not older.exists()
    assert live.exists() and other_prefix.exists() and (target / "left").exists()
    assert (tmp_path / "skill-mcp-run-link").is_symlink() and (tmp_path / "skill-mcp-run-file").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_directory_of_another_owner_is_kept(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    theirs = _dir(tmp_path, f"skill-mcp-run-{_dead_pid()}-abc")
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    assert rundirs.remove_stale(str(tmp_path), frozenset({os.geteuid()})) == []
    assert theirs.exists()
    # Positive control: the same directory goes when its owner is one of ours (a root server's
    # script user).
    assert rundirs.remove_stale(str(tmp_path), frozenset({os.geteuid(), nobody.pw_uid})) == [str(theirs)]


def test_a_run_directory_is_named_after_its_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    made = Path(rundirs.make())
    assert made.parent == tmp_path and made.name.startswith(f"skill-mcp-run-{os.getpid()}-")
    assert made.stat().st_mode & 0o777 == 0o700
    assert rundirs.remove_stale(str(tmp_path), frozenset({os.geteuid()})) == []  # its server lives
