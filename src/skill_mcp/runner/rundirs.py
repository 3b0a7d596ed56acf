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
import time
from collections.abc import Callable

from skill_mcp.limits import MAX_TIMEOUT_S
from skill_mcp.trees import NotRemoved, remove_tree

PREFIX = "skill-mcp-run-"
# Longer than any run can last (the timeout ceiling, then the SIGTERM grace, the kill wait and
# the drain), with room to spare: how old a pid-less directory must be before it is stale.
STALE_AFTER_S = MAX_TIMEOUT_S + 60


def make() -> str:
    """A fresh run directory (mode 0700) in the temporary directory; the caller owns it."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")


def remove_stale(parent: str, owners: frozenset[int], now: Callable[[], float] = time.time) -> list[str]:
    """Remove the run directories that servers which are gone left in ``parent``; return them.

    Only entries that are all of: named ``skill-mcp-run-*``, a real directory (never a link),
    owned by one of ``owners`` (this server's uid, and the script user's when it drops to one),
    and stale. A directory named after a pid (``skill-mcp-run-<pid>-...``) is stale when no
    process of that pid lives: a server that still runs, its run included, keeps its own (a pid
    reused since is taken as alive; that directory waits for a later start). A name without a
    pid comes from an older version of this tool, which may still be running beside this one:
    it is stale only once its status change time is further back than any run can last
    (``STALE_AFTER_S``; a script can move its directory's mtime, not its ctime).
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
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in owners or not _stale(entry.name, st.st_ctime, now()):
            continue
        try:
            remove_tree(entry.path)
        except NotRemoved:
            continue  # a later start tries again; what is left is this user's own
        removed.append(entry.path)
    return removed


def _stale(name: str, ctime: float, now: float) -> bool:
    pid = name[len(PREFIX) :].split("-", 1)[0]
    if not pid.isdigit():
        return ctime < now - STALE_AFTER_S
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's
    return False
