"""The process helpers both sides share (``skill_mcp.proctools``), on real processes."""

from __future__ import annotations

import signal
import subprocess
import sys

from skill_mcp.proctools import killpg


def _dumpable_after(code: str) -> str:
    probe = (
        "import ctypes\n" + code + "\nprint(ctypes.CDLL(None, use_errno=True).prctl(3, 0, 0, 0, 0))\n"
    )  # PR_GET_DUMPABLE
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


def test_set_nondumpable_makes_the_process_nondumpable() -> None:
    assert _dumpable_after("") == "1"  # positive control: a plain process is dumpable
    assert _dumpable_after("from skill_mcp.proctools import set_nondumpable\nassert set_nondumpable() is None") == "0"


def test_killpg_signals_the_whole_group_and_ignores_a_gone_one() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()
    killpg(proc.pid, signal.SIGKILL)  # the group is gone: no error
