"""The standalone spawner's per-run directories: made private, removed after the run, and
removed at the next start when a server died before it could.

A run's ``TMPDIR`` is ``skill-mcp-run-<server pid>-<random>`` in the server's temporary directory
(``tempfile.mkdtemp``: mode 0700, an unguessable suffix), handed to the script user when a root
server drops scripts to one. The server's pid in the name is what lets a later server tell a
directory whose server is gone from one a running server is using.
"""

from __future__ import annotations

import os
import stat
import tempfile

from skill_mcp.limits import remove_tree

PREFIX = "skill-mcp-run-"


def make() -> str:
    """A fresh run directory (mode 0700) in the temporary directory; the caller owns it."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")


def remove_stale(parent: str, owners: frozenset[int]) -> list[str]:
    """Remove the run directories that servers which are gone left in ``parent``; return them.

    Only entries that are all of: named ``skill-mcp-run-*``, a real directory (never a link),
    owned by one of ``owners`` (this server's uid, and the script user's when it drops to one),
    and not named after a live process (``skill-mcp-run-<pid>-...``: a server that still runs,
    its run included, keeps its own). A pid reused since is taken as alive: that directory waits
    for a later start rather than risk another server's run.
    """
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in owners or _named_after_live_process(entry.name):
            continue
        remove_tree(entry.path)
        removed.append(entry.path)
    return removed


def _named_after_live_process(name: str) -> bool:
    pid = name[len(PREFIX):].split("-", 1)[0]
    if not pid.isdigit():
        return False  # an older server's name, without a pid: nobody can be running in it
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, another user's
    return True
