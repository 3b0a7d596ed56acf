"""The process helpers both sides share: signal a process group, make this process non-dumpable.

The server's spawner (``runner.shim``, ``runner.spawn_local``), its hardening
(``runner.harden``), the declarations helper (``runner.dump_declarations``) and the appliance's
launcher (``skill_mcp_launcher.sandbox``, ``caps``) each used to keep a copy of these; this is
the one. How a run's directory is removed is a leaf of its own beside it (``trees.remove_tree``).

A leaf: the standard library only (``prctl(2)`` through ``ctypes``), so the launcher imports it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

__all__ = ["killpg", "set_nondumpable"]

_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4


def killpg(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pgid``; a group already gone (or no longer ours) is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def set_nondumpable() -> str | None:
    """``prctl(PR_SET_DUMPABLE, 0)``: no process of the same uid may attach to this one or read its
    memory (``/proc/<pid>/mem``, ``environ``, ``ptrace``), and it leaves no core. ``None`` once it
    holds; otherwise what failed (each caller decides whether that is fatal)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(ctypes.get_errno())}"
    if libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        return "the process is still dumpable after prctl"
    return None
