"""Runs share nothing: each run's private scratch directory, and what a run leaves behind.

The container's capabilities (docs/deploy.md) allow no mount or IPC namespace per run, so
isolation is by ownership and by removal, in this order, for every run:

1. **Scratch.** The launcher, as root, creates ``SCRATCH_ROOT/run-<32 hex digits>`` (128 bits
   from ``secrets``) with its effective gid switched to the script's group for that one
   ``mkdir``: the directory is ``root:<script group>`` mode 0770, so the script can write
   inside it but can neither remove, rename nor chmod it. ``SCRATCH_ROOT`` is ``root:root``
   mode 0711: the script uid can reach its own directory by name and can neither list the
   root nor create anything in it, so no name can be guessed, pre-created or squatted.
2. **Sweep.** Every process of the script uid is killed (``procs.kill_all``).
3. **Removal.** With nothing of the uid left alive, a child that has become the script uid
   (so no filesystem walk here ever runs with root's identity in a directory another uid can
   write) empties the scratch directory, removes every file, directory, socket, FIFO and POSIX
   message queue or shared-memory object the uid owns anywhere under ``SHARED_WRITABLE``, and
   every System V shared-memory segment, semaphore set and message queue it created or owns
   (``cuid`` as well as ``uid``: an owner can give an object away with ``IPC_SET``, never its
   creator). Then root removes the empty scratch directory. Every removal is ``skill_mcp.trees``
   (by descriptor, no recursion, no link followed, any depth) and fails closed: the child exits
   non-zero when anything of the uid is left, and the broker (``procs.Cleanup``) then refuses
   the next run (``cleanup-pending``) until a retry has removed it; a removal still running
   holds the next run the same way.

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
from collections.abc import Iterator

from skill_mcp import trees
from skill_mcp.outputs import OUTPUT_DIR_NAME

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


def make_output_dir(scratch: str, gid: int) -> str:
    """The run's empty output directory inside ``scratch``, ``root:gid`` 0770 like the scratch itself
    (made with the effective gid switched for the one ``mkdir``, as ``make_scratch`` does)."""
    path = os.path.join(scratch, OUTPUT_DIR_NAME)
    saved = os.getegid()
    os.setegid(gid)
    try:
        os.mkdir(path, 0o700)
    finally:
        os.setegid(saved)
    os.chmod(path, 0o770)  # noqa: S103 - the script group writes here
    return path


def remove_scratch(path: str) -> bool:
    """Root's half of the removal: the directory, once the script uid emptied it. True if gone."""
    with contextlib.suppress(OSError):  # not empty: reported by the caller, removed at the next boot
        os.rmdir(path)
    return not os.path.lexists(path)


def remove_leftovers(uid: int, scratch: tuple[str, ...]) -> None:
    """In a child that has become ``uid``, after every process of it is dead: see the module doc.

    Raises ``trees.NotRemoved`` when anything of the uid is still there afterwards (every place
    is tried first): the caller must then not start a run.
    """
    errors: list[str] = []
    for path in scratch:
        try:
            trees.empty_dir(path)
        except trees.NotRemoved as exc:
            errors.append(str(exc))
    for top in SHARED_WRITABLE:
        try:
            remove_owned(top, uid)
        except trees.NotRemoved as exc:
            errors.append(str(exc))
    remove_ipc(uid)
    kept = ipc_ids_of(uid)
    if kept:
        errors.append(f"System V objects kept: {kept}")
    if errors:
        raise trees.NotRemoved(",".join(scratch) or "(shared places)", len(errors), "; ".join(errors)[:2000])


# Directories of other owners held open at once while searching below ``top`` (each costs one
# descriptor, and one more while it is listed); the uid's own directories never count: they are
# removed whole by ``trees``, which bounds its own.
MAX_FOREIGN_DEPTH = 64
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_owned(top: str, uid: int) -> None:
    """Remove everything ``uid`` owns below ``top``, at any depth, on ``top``'s file system.

    Directories of other owners are descended into when the caller may list them (one the
    server made world-writable could hold the script's files); symbolic links are never followed.
    Iterative, by descriptor. Raises ``trees.NotRemoved`` when something of ``uid`` could not be
    removed, or could lie deeper in other owners' directories than ``MAX_FOREIGN_DEPTH``: what
    was not searched is not called clean.
    """
    try:
        top_fd = os.open(top, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return  # absent, or not listable by this uid: nothing it made can be reached there
    errors: list[str] = []
    device = os.fstat(top_fd).st_dev
    stack: list[tuple[int, Iterator[os.DirEntry[str]]]] = []
    try:
        stack.append((top_fd, os.scandir(top_fd)))
        while stack:
            fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                _close(fd, entries, top_fd)
                continue
            child = _visit(fd, entry, uid, device, errors, len(stack))
            if child is not None:
                try:
                    stack.append((child, os.scandir(child)))
                except OSError:
                    os.close(child)
    except OSError as exc:
        errors.append(f"{top}: {exc.strerror}")
    finally:
        for fd, entries in stack:
            _close(fd, entries, top_fd)
        os.close(top_fd)
    if errors:
        raise trees.NotRemoved(top, len(errors), errors[0])


def _close(fd: int, entries: Iterator[os.DirEntry[str]], top_fd: int) -> None:
    close = getattr(entries, "close", None)
    if close is not None:
        close()
    if fd != top_fd:
        os.close(fd)


def _visit(fd: int, entry: os.DirEntry[str], uid: int, device: int, errors: list[str], depth: int) -> int | None:
    """Remove ``entry`` if ``uid`` owns it; return a descriptor of it when it is another owner's
    directory to search."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    if st.st_uid == uid:
        try:
            trees.remove_at(fd, entry.name)
        except trees.NotRemoved as exc:
            errors.append(str(exc))
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_dev != device:
        return None
    try:
        child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
    except OSError:
        return None  # not listable by this uid: nothing it made can be below
    if depth >= MAX_FOREIGN_DEPTH:
        os.close(child)
        errors.append(f"{entry.name}: other owners' directories nested deeper than {MAX_FOREIGN_DEPTH} levels")
        return None
    return child


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
