"""Removing a tree a script wrote: depth-proof, descriptor-based, and honest about what is left.

A run's directory is written by code we do not trust, so its removal must hold against any shape
the script can give it: a 1,100-level chain (``shutil.rmtree`` recurses and raised
``RecursionError``, which nothing caught), a million files, directories it locked itself out of
(mode 0), links to anything, FIFOs and sockets. Here:

- **No recursion, no paths.** An explicit stack of directory descriptors; every step is relative to
  the descriptor of the directory it is in (``openat`` with ``O_NOFOLLOW | O_DIRECTORY``,
  ``unlinkat``, ``fstatat`` without following), so no path is ever resolved twice and no
  symbolic link is ever followed: a link is removed, never its target.
- **Bounded descriptors at any depth.** At most ``MAX_OPEN`` directories are open at once; a
  directory found below that depth is *hoisted*: renamed, within the tree being removed, up to
  its top under a fresh name, and removed from there later. Nothing ever leaves the tree.
- **Locked directories are given their owner's permissions back** (``fchmod``, or ``chmod`` of
  the entry when it cannot even be opened): what the script could have done itself. That needs
  no privilege when the caller is the owner (the standalone server, or the appliance's clean-up
  child running as the script uid); root reads every directory anyway.
- **One file system.** A directory on another device (a mount point) is never entered.
- **Honest.** ``remove_tree`` and ``empty_dir`` return only when the tree is gone (or empty);
  otherwise they raise ``NotRemoved`` with how many entries could not be removed and the first
  reason. A clean-up that can fail must fail closed, so callers refuse the next run on it.

A leaf: the standard library only, so the appliance's launcher imports it
(tests/appliance/test_launcher_imports.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from dataclasses import dataclass, field

__all__ = ["MAX_OPEN", "NotRemoved", "empty_dir", "remove_at", "remove_tree"]

# Directories held open at once by one walk (each costs one descriptor, plus one while it is
# listed); deeper ones are hoisted to the top of the tree.
MAX_OPEN = 32
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HOIST_PREFIX = ".skill-mcp-hoist-"


class NotRemoved(OSError):
    """Something of the tree is still there; ``left`` entries could not be removed."""

    def __init__(self, path: str, left: int, first: str) -> None:
        super().__init__(errno.ENOTEMPTY, f"{left} entries left under {path}: {first}")
        self.path = path
        self.left = left
        self.first = first


@dataclass(slots=True)
class _Frame:
    fd: int
    name: str  # its name in the frame below (unused for the top)
    skip: set[str] = field(default_factory=set)  # entries that could not be removed; not tried again


@dataclass(slots=True)
class _Walk:
    """One removal's state: the errors met so far."""

    path: str
    errors: list[str] = field(default_factory=list)

    def fail(self, name: str, exc: OSError | str) -> None:
        self.errors.append(f"{name}: {exc.strerror if isinstance(exc, OSError) else exc}")

    def check(self) -> None:
        if self.errors:
            raise NotRemoved(self.path, len(self.errors), self.errors[0])


def remove_tree(path: str) -> None:
    """Remove ``path`` (a file, link or directory tree); raise ``NotRemoved`` unless it is gone.

    The parent of ``path`` is trusted (the caller's own directory); nothing below it is.
    A ``path`` that does not exist is gone already.
    """
    parent, name = os.path.split(os.path.normpath(path))
    if name in ("", ".", ".."):
        raise ValueError(f"not a removable path: {path!r}")
    try:
        pfd = os.open(parent or ".", _DIR_FLAGS & ~os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NotRemoved(path, 1, f"its directory: {exc.strerror}") from None
    try:
        remove_at(pfd, name, label=path)
    finally:
        os.close(pfd)


def empty_dir(path: str) -> None:
    """Remove everything inside the directory ``path`` and keep it; raise ``NotRemoved`` unless empty.

    For a directory the caller may empty but not remove (the appliance's run directory, which
    belongs to root and is group-writable for the script uid).
    """
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NotRemoved(path, 1, exc.strerror or str(exc)) from None
    walk = _Walk(path)
    try:
        _empty(fd, os.fstat(fd).st_dev, walk)
    finally:
        os.close(fd)
    walk.check()


def remove_at(dir_fd: int, name: str, *, label: str | None = None) -> None:
    """Remove the entry ``name`` of the open directory ``dir_fd`` and all below it; never follows a
    link. Raise ``NotRemoved`` unless it is gone."""
    walk = _Walk(label or name)
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NotRemoved(walk.path, 1, exc.strerror or str(exc)) from None
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise NotRemoved(walk.path, 1, exc.strerror or str(exc)) from None
        return
    fd = _open_dir(dir_fd, name, walk)
    if fd is not None:
        try:
            if os.fstat(fd).st_dev != st.st_dev:
                walk.fail(name, "replaced by another file system while being removed")
            else:
                _empty(fd, st.st_dev, walk)
        finally:
            os.close(fd)
    if not walk.errors:
        try:
            os.rmdir(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            walk.fail(name, exc)
    walk.check()


def _open_dir(dir_fd: int, name: str, walk: _Walk) -> int | None:
    """Open the directory ``name`` (never through a link), giving it back its owner's permissions
    when it was locked; ``None`` (with the error recorded) when it cannot be opened."""
    for attempt in range(2):
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except PermissionError as exc:
            if attempt:
                walk.fail(name, exc)
                return None
            # A directory without read permission cannot be opened at all. It was lstat'ed as a
            # directory; chmod follows links, but only a process of the caller's own uid could
            # have swapped one in since, and it can chmod whatever we could reach through it.
            try:
                os.chmod(name, stat.S_IRWXU, dir_fd=dir_fd)
            except OSError:
                walk.fail(name, exc)
                return None
            continue
        except OSError as exc:
            walk.fail(name, exc)
            return None
        st = os.fstat(fd)
        if stat.S_IMODE(st.st_mode) & stat.S_IRWXU != stat.S_IRWXU:
            with contextlib.suppress(OSError):  # not ours (root's walk): root needs no bits
                os.fchmod(fd, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)
        return fd
    return None


def _empty(top_fd: int, device: int, walk: _Walk) -> None:
    """Remove every entry below the open directory ``top_fd`` (kept itself). Iterative."""
    stack = [_Frame(top_fd, "")]
    try:
        while stack:
            frame = stack[-1]
            child = _scan(frame, stack, device, walk)
            if child is not None:
                stack.append(child)
                continue
            # Nothing left that can be removed in this frame: it is done.
            stack.pop()
            if not stack:
                return
            os.close(frame.fd)
            below = stack[-1]
            if frame.skip:
                below.skip.add(frame.name)  # its failures are recorded already
                continue
            try:
                os.rmdir(frame.name, dir_fd=below.fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                walk.fail(frame.name, exc)
                below.skip.add(frame.name)
    finally:
        for frame in stack[1:]:
            os.close(frame.fd)


def _scan(frame: _Frame, stack: list[_Frame], device: int, walk: _Walk) -> _Frame | None:
    """Remove what can be removed in ``frame``'s directory; return a subdirectory to descend into,
    or ``None`` when a full listing found nothing more to do."""
    try:
        entries = os.scandir(frame.fd)
    except OSError as exc:
        walk.fail("(listing)", exc)
        frame.skip.add("")  # marks the frame failed
        return None
    with entries:
        for entry in entries:
            name = entry.name
            if name in frame.skip:
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if not is_dir:
                try:
                    os.unlink(name, dir_fd=frame.fd)
                except FileNotFoundError:
                    pass
                except IsADirectoryError:
                    continue  # replaced by a directory since the listing: the next listing sees it
                except OSError as exc:
                    walk.fail(name, exc)
                    frame.skip.add(name)
                continue
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=frame.fd)  # most directories a walk meets are empty by now
                continue
            if len(stack) >= MAX_OPEN:
                _hoist(frame, name, stack[0], walk)
                continue
            fd = _open_dir(frame.fd, name, walk)
            if fd is None:
                frame.skip.add(name)
                continue
            if os.fstat(fd).st_dev != device:
                os.close(fd)
                walk.fail(name, "another file system is mounted there")
                frame.skip.add(name)
                continue
            return _Frame(fd, name)
    return None


def _hoist(frame: _Frame, name: str, top: _Frame, walk: _Walk) -> None:
    """Move a directory found too deep up to the top of the tree, to be removed from there."""
    new = _HOIST_PREFIX + secrets.token_hex(8)
    for attempt in range(2):
        try:
            os.rename(name, new, src_dir_fd=frame.fd, dst_dir_fd=top.fd)
            return
        except FileNotFoundError:
            return
        except PermissionError as exc:
            # Moving a directory rewrites its "..": that needs write permission on it.
            if attempt:
                walk.fail(name, exc)
                frame.skip.add(name)
                return
            try:
                os.chmod(name, stat.S_IRWXU, dir_fd=frame.fd)
            except OSError:
                walk.fail(name, exc)
                frame.skip.add(name)
                return
        except OSError as exc:
            walk.fail(name, exc)
            frame.skip.add(name)
            return
