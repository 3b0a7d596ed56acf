"""Runs share nothing: each run's private scratch directory, and what a run leaves behind.

The container's capabilities (docs/deploy.md) allow no mount or IPC namespace per run, so
isolation is by ownership and by removal, in this order, for every run:

1. **Scratch.** The launcher, as root, creates ``SCRATCH_ROOT/run-<32 hex digits>`` (128 bits
   from ``secrets``) with its effective gid switched to the script's group for that one
   ``mkdir``: the directory is ``root:<script group>`` mode 0770, so the script can write
   inside it but can neither remove, rename nor chmod it. ``SCRATCH_ROOT`` is ``root:root``
   mode 0711: the script uid can reach its own directory by name and can neither list the
   root nor create anything in it, so no name can be guessed, pre-created or squatted.
2. **Sweep.** Every process of the script uid is killed (``procs.sweep``).
3. **Removal.** With nothing of the uid left alive, a child that has become the script uid
   (so no filesystem walk here ever runs with root's identity in a directory another uid can
   write) empties the scratch directory, removes every file, directory, socket, FIFO and POSIX
   message queue or shared-memory object the uid owns anywhere under ``SHARED_WRITABLE``, and
   every System V shared-memory segment, semaphore set and message queue it created or owns
   (``cuid`` as well as ``uid``: an owner can give an object away with ``IPC_SET``, never its
   creator). Then root removes the empty scratch directory.

``SHARED_WRITABLE`` is every place the script uid can write in the image under the documented
flags (tests/appliance/test_isolation.py proves the list against a search of the whole file
system as that uid). Kernel keyrings, the one other per-uid store that outlives processes, are
closed by Docker's default seccomp profile (``add_key``/``keyctl`` refused).

At boot ``prepare`` makes ``SCRATCH_ROOT`` and returns the run directories an earlier life of
the container left in it; the boot sweep removes them with everything else of the uid's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import stat

from skill_mcp.limits import remove_tree

SCRATCH_ROOT = "/run/skill-mcp/scratch"
SCRATCH_PREFIX = "run-"
# Where the script uid can write, besides its own scratch directory. /run and /var/tmp are
# read-only or root's under the documented flags; they are walked anyway, for a deployment
# that leaves the image's file system writable.
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run")  # noqa: S108 - we clean them
_IPC_RMID = 0
_IPC_KINDS = ("shm", "msg", "sem")


def prepare() -> tuple[str, ...]:
    """Boot: make ``SCRATCH_ROOT`` (root, 0711); return the run directories already in it."""
    for path, mode in ((os.path.dirname(SCRATCH_ROOT), 0o755), (SCRATCH_ROOT, 0o711)):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
    with os.scandir(SCRATCH_ROOT) as entries:
        return tuple(e.path for e in entries if e.name.startswith(SCRATCH_PREFIX))


def make_scratch(gid: int) -> str:
    """Create a fresh run directory, ``root:gid`` 0770, under ``SCRATCH_ROOT``; return its path.

    The launcher holds no ``CHOWN``: the group is set by creating the directory with the
    effective gid switched (``SETGID``) for that one call. A name that exists already is a
    128-bit collision or something planted; either way another name is drawn.
    """
    for _ in range(4):
        path = os.path.join(SCRATCH_ROOT, SCRATCH_PREFIX + secrets.token_hex(16))
        saved = os.getegid()
        os.setegid(gid)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        finally:
            os.setegid(saved)
        os.chmod(path, 0o770)  # noqa: S103 - the script group writes here; the umask may have taken those bits
        st = os.lstat(path)
        if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (0, gid, 0o770):
            raise OSError(f"the run directory {path} came out {st.st_uid}:{st.st_gid} {stat.S_IMODE(st.st_mode):o}")
        return path
    raise FileExistsError(f"no fresh run directory name under {SCRATCH_ROOT}")


def remove_scratch(path: str) -> bool:
    """Root's half of the removal: the directory, once the script uid emptied it. True if gone."""
    with contextlib.suppress(OSError):  # not empty: reported by the caller, removed at the next boot
        os.rmdir(path)
    return not os.path.lexists(path)


def remove_leftovers(uid: int, scratch: tuple[str, ...]) -> None:
    """In a child that has become ``uid``, after every process of it is dead: see the module doc."""
    for path in scratch:
        _empty(path)
    for top in SHARED_WRITABLE:
        remove_owned(top, uid)
    remove_ipc(uid)


def _empty(directory: str) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        remove_tree(entry.path)


def remove_owned(top: str, uid: int) -> None:
    """Remove everything ``uid`` owns below ``top``, at any depth, on ``top``'s file system.

    Directories of other owners are descended into when the caller may list them (one the
    server made world-writable could hold the script's files); symbolic links are never followed.
    """
    try:
        device = os.lstat(top).st_dev
    except OSError:
        return
    stack = [top]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid:
                remove_tree(entry.path)
            elif stat.S_ISDIR(st.st_mode) and st.st_dev == device:
                stack.append(entry.path)


def ipc_ids_of(uid: int) -> list[tuple[str, int]]:
    """System V IPC objects (shared memory, message queues, semaphores) ``uid`` owns or created."""
    found = []
    for kind in _IPC_KINDS:
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="ascii") as fh:
                header = fh.readline().split()
                cols = (header.index("uid"), header.index("cuid"))
                for line in fh:
                    row = line.split()
                    if len(row) > max(cols) and uid in (int(row[cols[0]]), int(row[cols[1]])):
                        found.append((kind, int(row[1])))
        except (OSError, ValueError):
            continue
    return found


def remove_ipc(uid: int) -> None:
    """``IPC_RMID`` each of ``uid``'s System V objects; allowed to their owner or creator.

    The standard library has no call for these (``ipcrm`` is util-linux's, not in the image);
    each is one libc function. A segment still attached is destroyed at its last detach, and
    nothing of the uid is alive to hold one.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, ident in ipc_ids_of(uid):
        if kind == "sem":
            libc.semctl(ident, 0, _IPC_RMID)
        elif kind == "shm":
            libc.shmctl(ident, _IPC_RMID, None)
        else:
            libc.msgctl(ident, _IPC_RMID, None)
