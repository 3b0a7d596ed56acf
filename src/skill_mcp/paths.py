"""Path rules shared by every reader and by the fence.

Two checks, always both, in this order:

1. ``check_relpath`` - a pure string check of a skill-relative path: plain ``/``-separated
   segments; no leading ``/``; no empty, ``.`` or ``..`` segment; no backslash, ``%``, NUL or
   other control character; no segment whose compatibility form (NFKC) would spell a
   separator or a dot segment; bounded length. It refuses shapes that must never be joined,
   even where the join would happen to land inside the skill.
2. ``resolve_inside`` - the joined path with every symlink followed must still be inside the
   skill's real directory and must be a regular file. This catches a symlink planted inside
   the bundle, which no string check can see.

``open_regular`` then opens the resolved path without following a final symlink and
re-checks, on the open descriptor, that it is the same regular file. The window between
resolution and open is closed for the last component only; a directory swapped for a
symlink in between is caught because the opened inode must match the one resolved.

This module imports only the standard library: the container launcher reuses it.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Callable
from pathlib import Path

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal

MAX_PATH_CHARS = 1024
MAX_SEGMENT_CHARS = 255
_FORBIDDEN_CHARS = frozenset("\\%")
_ASCII_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\%]")  # _bad_char, restricted to ASCII
# Characters drawn like a slash, a backslash or a dot that NFKC does not fold to one. A
# name holding them is not dangerous to the kernel, but it is made to mislead a person
# reading a path, so it is refused like the real thing.
_LOOKALIKES = frozenset("\u2215\u2044\u29f8\u29f9\u2216\ufe68\uff3c\u2024\u2025\u2026\u3002\uff61\u0702\ua4f8")


def _bad_char(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F or ch in _FORBIDDEN_CHARS


def _plain_ascii_problem(rel: str, allow_leading_dash: bool) -> str | None:
    """``relpath_problem`` for ASCII text free of forbidden characters (the common case).

    Such text holds no look-alike, no surrogate and nothing NFKC changes, so only the
    segment rules are left to check; the answer is the one the full check gives.
    """
    for segment in rel.split("/"):
        if segment in ("", ".", ".."):
            return "the path has an empty, '.' or '..' segment"
        if len(segment) > MAX_SEGMENT_CHARS:
            return f"a segment is longer than {MAX_SEGMENT_CHARS} characters"
        if not allow_leading_dash and segment.startswith("-"):
            return "a segment starts with '-'"
    return None


def relpath_problem(rel: str, *, allow_leading_dash: bool = True) -> str | None:
    """Return why ``rel`` is not a plain skill-relative path, or ``None`` when it is."""
    if (
        isinstance(rel, str)
        and rel
        and len(rel) <= MAX_PATH_CHARS
        and rel[0] != "/"
        and rel.isascii()
        and not _ASCII_FORBIDDEN.search(rel)
    ):
        return _plain_ascii_problem(rel, allow_leading_dash)
    return _full_problem(rel, allow_leading_dash)


def _full_problem(rel: str, allow_leading_dash: bool) -> str | None:
    if not isinstance(rel, str) or rel == "":
        return "the path is empty"
    if len(rel) > MAX_PATH_CHARS:
        return f"the path is longer than {MAX_PATH_CHARS} characters"
    if rel.startswith("/"):
        return "the path is absolute; give it relative to the skill directory"
    for ch in rel:
        if _bad_char(ch):
            return f"the path holds a forbidden character (U+{ord(ch):04X})"
        if ch in _LOOKALIKES:
            return f"the path holds a look-alike of a separator or dot (U+{ord(ch):04X})"
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return "the path is not valid UTF-8"
    for segment in rel.split("/"):
        if segment in ("", ".", ".."):
            return "the path has an empty, '.' or '..' segment"
        if len(segment) > MAX_SEGMENT_CHARS:
            return f"a segment is longer than {MAX_SEGMENT_CHARS} characters"
        folded = unicodedata.normalize("NFKC", segment)
        if folded != segment and (
            folded in (".", "..") or any(c in folded for c in "/\\%") or any(_bad_char(c) for c in folded)
        ):
            return "a segment is a look-alike of a separator or a dot segment"
        if not allow_leading_dash and segment.startswith("-"):
            return "a segment starts with '-'"
    return None


def check_relpath(rel: str, *, allow_leading_dash: bool = True) -> str:
    """Return ``rel`` unchanged when it is a plain relative path; raise ``invalid-path`` otherwise."""
    problem = relpath_problem(rel, allow_leading_dash=allow_leading_dash)
    if problem is not None:
        raise SkillMcpError(Refusal.INVALID_PATH, problem, {"path": rel})
    return rel


def is_inside(base_real: Path, candidate_real: Path) -> bool:
    """True when ``candidate_real`` is ``base_real`` or below it (both already resolved).

    Compared as strings: resolved paths are normalised (no ``.``, ``..``, doubled or
    trailing slash), so a prefix ending at a separator is exactly "below" - and far cheaper
    than walking ``Path.parents`` for every file of every skill.
    """
    return below(str(base_real), str(candidate_real))


# ``Path._make_child_relpath`` (CPython 3.11-3.12): the child of a path by one plain segment,
# without parsing it again; ``root / name`` where it is missing.
_CHILD: Callable[[Path, str], Path] | None = getattr(Path, "_make_child_relpath", None)


def path_under(root: Path, root_real: str, real: str) -> Path:
    """``Path(real)`` for a resolved path (``os.path.realpath``'s), made as one child of ``root``
    (whose text is ``root_real``) when it is directly under it - a skill in the common layout -
    which skips parsing the whole path again."""
    cut = len(root_real)
    if real.startswith(root_real) and real[cut : cut + 1] == "/":
        name = real[cut + 1 :]
        # A resolved path has no empty, ``.`` or ``..`` segment.
        if name and "/" not in name:
            return _CHILD(root, name) if _CHILD is not None else root / name
    return Path(real)


def below(base: str, candidate: str) -> bool:
    """``is_inside`` for paths already held as text (both resolved)."""
    return candidate == base or candidate.startswith(base if base.endswith("/") else base + "/")


def _kernel_resolve(joined: Path) -> tuple[Path, os.stat_result] | None:
    """The kernel's resolution of ``joined`` and its stat, or None to take the slow path.

    ``os.path.realpath`` walks the path one ``lstat`` at a time in Python; for a path whose
    last component is not a link, opening it with ``O_PATH | O_NOFOLLOW`` lets the kernel
    resolve every earlier link and ``/proc/self/fd`` names the result: the same real path,
    in a handful of system calls. Anything unusual (a final link, no /proc, a file unlinked
    meanwhile, an error) returns None and the caller resolves the portable way, which also
    words every refusal.
    """
    try:
        fd = os.open(joined, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISLNK(st.st_mode):
            return None
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    finally:
        os.close(fd)
    if not real.startswith("/") or real.endswith(" (deleted)"):
        return None
    return Path(real), st


def resolve_inside(base_real: Path, rel: str, *, allow_leading_dash: bool = True) -> tuple[Path, os.stat_result]:
    """String-check ``rel``, join it to ``base_real``, resolve it, and demand a regular file inside.

    ``base_real`` must already be a real path (``os.path.realpath``). Returns the resolved
    path and its ``stat`` so a later open can prove it reached the same inode.
    """
    check_relpath(rel, allow_leading_dash=allow_leading_dash)
    joined = base_real / rel
    fast = _kernel_resolve(joined)
    if fast is not None:
        real, st = fast
        if not is_inside(base_real, real):
            raise SkillMcpError(Refusal.OUTSIDE_SKILL, "the path resolves outside the skill directory", {"path": rel})
        if not stat.S_ISREG(st.st_mode):
            raise SkillMcpError(Refusal.NOT_A_FILE, "the path is not a regular file", {"path": rel})
        return real, st
    real = Path(os.path.realpath(joined))
    if not is_inside(base_real, real):
        raise SkillMcpError(Refusal.OUTSIDE_SKILL, "the path resolves outside the skill directory", {"path": rel})
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise SkillMcpError(Refusal.NOT_FOUND, "no such file in this skill", {"path": rel}) from None
    except OSError as exc:
        raise SkillMcpError(Refusal.NOT_FOUND, f"cannot stat the file: {exc.strerror}", {"path": rel}) from None
    if not stat.S_ISREG(st.st_mode):
        raise SkillMcpError(Refusal.NOT_A_FILE, "the path is not a regular file", {"path": rel})
    return real, st


def open_regular(real: Path, expected: os.stat_result, rel: str) -> int:
    """Open ``real`` read-only without following a final symlink or blocking on a FIFO.

    Returns a descriptor whose inode is the one ``resolve_inside`` saw; raises
    ``file-changed`` when it is not, so a swap between the checks and the open is refused.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise SkillMcpError(
            Refusal.FILE_CHANGED, f"the file changed before it was opened: {exc.strerror}", {"path": rel}
        ) from None
    return _same_regular(fd, expected, rel)


def _same_regular(fd: int, expected: os.stat_result, rel: str) -> int:
    """``fd`` when it is a regular file with ``expected``'s inode; else closed and ``file-changed``."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino):
        os.close(fd)
        raise SkillMcpError(Refusal.FILE_CHANGED, "the file changed before it was opened", {"path": rel})
    return fd


def pin_inside(base_real: str, rel: str) -> tuple[int, os.stat_result] | None:
    """``resolve_inside``'s kernel path, keeping the file it resolved pinned by a descriptor.

    ``base_real`` is a real directory path as text (no trailing slash). Returns an ``O_PATH``
    descriptor of the regular file ``rel`` names below it, with its ``stat``; the caller owns
    the descriptor and must close it. Raises exactly the refusals ``resolve_inside`` raises on
    its kernel path (after the same string check), and returns None wherever that path would
    hand over to the portable one (a final link, no /proc, an unlinked file, any error), so
    the caller then calls ``resolve_inside``. ``open_pinned`` reads the pinned file without
    walking the path again, so nothing can be swapped between the checks and the read.
    """
    check_relpath(rel)
    try:
        fd = os.open(f"{base_real}/{rel}", os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    try:
        st = os.fstat(fd)
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        os.close(fd)
        return None
    if stat.S_ISLNK(st.st_mode) or not real.startswith("/") or real.endswith(" (deleted)"):
        os.close(fd)
        return None
    if not below(base_real, real):
        os.close(fd)
        raise SkillMcpError(Refusal.OUTSIDE_SKILL, "the path resolves outside the skill directory", {"path": rel})
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise SkillMcpError(Refusal.NOT_A_FILE, "the path is not a regular file", {"path": rel})
    return fd, st


def open_pinned(pinned: int, expected: os.stat_result, rel: str) -> int:
    """A read-only descriptor of the file an ``O_PATH`` descriptor from ``pin_inside`` holds.

    Opened through ``/proc/self/fd``, which reaches the pinned inode itself rather than a path,
    then checked like ``open_regular``: a regular file with the inode ``pin_inside`` saw.
    """
    try:
        fd = os.open(f"/proc/self/fd/{pinned}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SkillMcpError(
            Refusal.FILE_CHANGED, f"the file could not be opened: {exc.strerror}", {"path": rel}
        ) from None
    return _same_regular(fd, expected, rel)
