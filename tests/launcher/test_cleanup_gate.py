"""The broker's clean-up gate (``procs.Cleanup``): no run starts beside what an earlier run left.
No Docker: real clean-up children as ``nobody``, with the removal itself replaced (the real one
sweeps every place the script uid writes, which on this machine would be other people's files),
and the uid-wide kill replaced for the same reason.

A clean-up still running refuses the next run with ``cleanup-pending`` and is never killed for
it; one that failed is retried; once one exited 0 and the run directory is gone, runs start.
"""

from __future__ import annotations

import encodings.ascii  # noqa: F401 - the child, as nobody, cannot read this Python's files to import it
import os
import pwd
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from skill_mcp import trees
from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp_launcher import broker as broker_mod
from skill_mcp_launcher import isolation, policy, procs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the clean-up child drops from root to nobody")


@pytest.fixture
def nobody(monkeypatch: pytest.MonkeyPatch) -> procs.Account:
    monkeypatch.setattr(procs, "kill_all", lambda account, reaper, timeout: 0)
    entry = pwd.getpwnam("nobody")
    return procs.Account("nobody", entry.pw_uid, entry.pw_gid)


@pytest.fixture
def flags() -> Any:
    path = Path(tempfile.mkdtemp(prefix="skill-mcp-gate-"))
    path.chmod(0o777)
    yield path
    trees.remove_tree(str(path))


def _scratch(flags: Path) -> str:
    run = flags / "run-0"
    run.mkdir()
    run.chmod(0o777)
    (run / "left").write_text("what the run left")
    return str(run)


def _waits_for(flag: Path) -> Any:
    def remove(uid: int, scratch: tuple[str, ...]) -> None:
        while not flag.exists():  # a removal that takes as long as the test says
            time.sleep(0.02)
        trees.empty_dir(scratch[0])

    return remove


@pytest.mark.slow
def test_the_next_run_waits_for_a_cleanup_still_running_and_never_kills_it(
    nobody: procs.Account, flags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "remove_leftovers", _waits_for(flags / "go"))
    reaper = procs.Reaper()
    cleanup = procs.Cleanup(nobody)
    scratch = _scratch(flags)
    assert cleanup.after_run(reaper, scratch, timeout=0.2) == "running"
    pid = cleanup.pid
    assert pid is not None
    # The next request: still running, so refused, and the clean-up is left alone.
    assert cleanup.ensure(reaper, 0.2) == "running"
    assert cleanup.pid == pid and os.path.exists(f"/proc/{pid}")
    with pytest.raises(RuntimeError, match="still running"):
        cleanup.start(reaper)  # a sweep now would end it half-done
    assert cleanup.report() == {"cleanup": "running", "cleanupDetail": "the clean-up is still running"}
    # Positive control: once it is done, the run directory goes and runs start.
    (flags / "go").touch()
    assert cleanup.ensure(reaper, 10) == "done"
    assert not os.path.exists(scratch) and cleanup.report() == {"cleanup": "done"}


def test_a_cleanup_that_fails_is_reported_and_retried(
    nobody: procs.Account, flags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries = flags / "tries"

    def remove(uid: int, scratch: tuple[str, ...]) -> None:
        with open(tries, "a") as fh:
            fh.write("x")
        if tries.read_text() == "x":  # the first try leaves something
            raise trees.NotRemoved(scratch[0], 1, "d: Directory not empty")
        trees.empty_dir(scratch[0])

    monkeypatch.setattr(isolation, "remove_leftovers", remove)
    reaper = procs.Reaper()
    cleanup = procs.Cleanup(nobody)
    scratch = _scratch(flags)
    assert cleanup.after_run(reaper, scratch, timeout=10) == "failed"
    assert cleanup.failure == "something of the script user could not be removed" and cleanup.scratch == [scratch]
    assert cleanup.ensure(reaper, 10) == "done"  # the retry, with the directory still on its list
    assert tries.read_text() == "xx" and not os.path.exists(scratch)


def test_a_cleanup_child_that_dies_is_not_taken_for_done(
    nobody: procs.Account, flags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def remove(uid: int, scratch: tuple[str, ...]) -> None:
        raise RecursionError("maximum recursion depth exceeded")  # what rmtree raised on a deep tree

    monkeypatch.setattr(isolation, "remove_leftovers", remove)
    cleanup = procs.Cleanup(nobody)
    assert cleanup.after_run(procs.Reaper(), _scratch(flags), timeout=10) == "failed"
    assert cleanup.failure == "the clean-up child ended with status 1"


def _broker(cleanup: procs.Cleanup) -> broker_mod.Broker:
    users = procs.Users(cleanup.account, cleanup.account, cleanup.account)
    return broker_mod.Broker(
        users=users,
        reaper=procs.Reaper(),
        roots=("/nonexistent-root",),
        interpreters={"python": sys.executable},
        fence_ok=True,
        fence_detail="test",
        grants=policy.Grants("declaration"),
        environ={},
        parse_user=cleanup.account,
        cleanup=cleanup,
    )


@pytest.mark.slow
def test_script_cannot_start_beside_an_unfinished_cleanup_it_is_refused_by_name(
    nobody: procs.Account, flags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "remove_leftovers", _waits_for(flags / "go"))
    monkeypatch.setattr(broker_mod, "CLEANUP_WAIT_S", 0.2)
    cleanup = procs.Cleanup(nobody)
    broker = _broker(cleanup)
    assert cleanup.after_run(broker.reaper, _scratch(flags), timeout=0.2) == "running"
    with pytest.raises(SkillMcpError) as refused:
        broker._ensure_clean()
    assert refused.value.reason is Refusal.CLEANUP_PENDING
    assert (
        refused.value.data["sweep"]["cleanup"] == "running" and refused.value.data["sweep"]["scratchRemoved"] is False
    )
    assert broker.hello()["cleanup"] == "running"
    (flags / "go").touch()
    monkeypatch.setattr(broker_mod, "CLEANUP_WAIT_S", 10)
    broker._ensure_clean()  # positive control: admitted once the clean-up is complete
    assert broker.hello()["cleanup"] == "done"
