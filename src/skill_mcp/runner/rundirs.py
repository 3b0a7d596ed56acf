"""The standalone spawner's per-run directories: made private, removed after the run, and
removed at the next start when a server died before it could.

A run's ``TMPDIR`` is ``skill-mcp-run-<server pid>-<random>`` in the server's temporary directory
(``tempfile.mkdtemp``: mode 0700, an unguessable suffix), handed to the script user when a root
server drops scripts to one. The server's pid in the name is what lets a later server tell a
directory whose server is gone from one a running server is using.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile

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
    removed = []
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
        remove(entry.path)
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


def remove(path: str) -> None:
    """Remove a run directory, even where its script made parts of it unreadable to their owner.

    ``rmtree`` never follows a link. A root server reads every directory anyway; any other server
    first gives each directory below its owner's permissions back. That pass goes by path, so a
    process of the script's that is still alive could point it elsewhere - but only at what the
    server's own uid owns, which that process, running as the same uid, could change itself.
    """
    stack = [path] if os.geteuid() != 0 else []
    while stack:
        directory = stack.pop()
        with contextlib.suppress(OSError):
            os.chmod(directory, stat.S_IRWXU)
        try:
            with os.scandir(directory) as entries:
                stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
    shutil.rmtree(path, ignore_errors=True)
