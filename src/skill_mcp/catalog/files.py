"""A skill's files: the walk that lists them, and every read of them.

The walk lists each regular file under the skill directory that a read tool can address.
Everything else is reported, never dropped in silence: a symlink leading out of the skill
(``symlink-escape``), a name the read tools cannot address (``unaddressable-filename``), a
FIFO, socket or device (``special-file``), a directory link looping back on the walk
(``symlink-loop``). The walk stops counting one file past the extension's limit, so a huge
tree costs bounded time.

Reads re-check everything against the disk (``paths.resolve_inside`` then
``paths.open_regular``) and serve only files the scan listed. Digests are never stale: a
digest is recomputed whenever the file's identity (inode, size, mtime) differs from the one
it was computed for; ``DigestMemo`` only remembers digests of entries it verified.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from skill_mcp.catalog.digests import DigestMemo as DigestMemo  # re-exported: readers take one
from skill_mcp.catalog.digests import identity
from skill_mcp.catalog.frontmatter import FrontmatterError, split
from skill_mcp.errors import SkillMcpError
from skill_mcp.models import Problem, Skill, SkillFile, uri_path
from skill_mcp.paths import (
    MAX_PATH_CHARS,
    is_inside,
    open_pinned,
    open_regular,
    pin_inside,
    relpath_problem,
    resolve_inside,
)
from skill_mcp.reasons import Level, ProblemReason, Refusal

MAX_FILES = 512
# Directories an interpreter writes next to the code it runs (pip byte-compiles an installed
# pack's scripts into them). They are build output, not the author's content: never listed,
# never served, never pinned - the one documented exception to "reported, never silent".
BUILD_OUTPUT_DIRS = frozenset({"__pycache__"})
MAX_TOTAL_BYTES = 16 * 1024 * 1024
SKILL_MD = "SKILL.md"
_CHUNK = 256 * 1024


# What a scan result depends on, per directory and file it looked at: (path relative to the
# skill, "" for the skill directory; inode, size, mtime_ns, ctime_ns). The persistent cache
# (``catalog.cache``) serves a result again only while every stamp still matches.
Stamp = tuple[str, int, int, int, int]


def stamp(rel: str, st: os.stat_result) -> Stamp:
    return (rel, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True, slots=True)
class Walk:
    files: tuple[SkillFile, ...]
    problems: tuple[Problem, ...]
    nested: tuple[Path, ...]  # subdirectories (as walked) that hold their own SKILL.md
    over_limit: bool
    stamps: tuple[Stamp, ...] = ()
    # False when the result also depends on something no stamp pins: a symbolic link (its
    # target can change without any stamp changing) or a walk cut short at the limit.
    stampable: bool = True


def walk_skill(directory: Path, skill_name: str) -> Walk:
    """List the servable files of the skill whose real directory is ``directory``."""
    files: list[SkillFile] = []
    problems: list[Problem] = []
    nested: list[Path] = []
    visited: set[tuple[int, int]] = set()
    stamps: list[Stamp] = []
    unpinned = False
    total = 0

    def report(path: Path, reason: ProblemReason, detail: str) -> None:
        problems.append(Problem(str(path), reason, detail, Level.WARNING, skill_name))

    def entry_target(entry: os.DirEntry[str], shown: Path, name: str) -> tuple[str, os.stat_result] | None:
        """The real path and stat of one entry, or None (reported) when it is not servable."""
        nonlocal unpinned
        if not entry.is_symlink():
            # Not a link inside a real directory: its real path is the directory's plus its
            # name, so the resolution and the containment check below have nothing to do.
            try:
                return entry.path, entry.stat(follow_symlinks=False)
            except OSError:
                report(shown / name, ProblemReason.SYMLINK_ESCAPE, "not served: a link whose target does not exist")
                return None
        unpinned = True
        try:
            target = Path(os.path.realpath(entry.path))
            tst = os.stat(target)
        except OSError:
            report(shown / name, ProblemReason.SYMLINK_ESCAPE, "not served: a link whose target does not exist")
            return None
        if not is_inside(directory, target):
            report(shown / name, ProblemReason.SYMLINK_ESCAPE, "not served: the link leads out of the skill")
            return None
        return str(target), tst

    def visit(real_dir: Path, rel_prefix: str, shown: Path) -> bool:
        nonlocal total, unpinned
        try:
            st = os.stat(real_dir)
            entries = sorted(os.scandir(real_dir), key=lambda e: e.name)
        except OSError as exc:
            report(shown, ProblemReason.UNREADABLE, f"the directory cannot be read: {exc.strerror}")
            unpinned = True  # nothing stamped says when it becomes readable
            return True
        visited.add((st.st_dev, st.st_ino))
        stamps.append(stamp(rel_prefix[:-1], st))
        if rel_prefix and any(e.name == SKILL_MD for e in entries):
            nested.append(shown)
        for entry in entries:
            name = os.fsdecode(entry.name)
            if name in BUILD_OUTPUT_DIRS and entry.is_dir(follow_symlinks=False):
                continue
            rel = f"{rel_prefix}{name}"
            # The prefix passed this check when its directory was entered, and every rule but
            # the total length is per character or per segment: checking the new segment is
            # checking the path (the full path is checked when it is long, for the message).
            problem = relpath_problem(name) if len(rel) <= MAX_PATH_CHARS else relpath_problem(rel)
            if problem is not None:
                report(shown / name, ProblemReason.UNADDRESSABLE_FILENAME, f"not served: {problem}")
                continue
            found = entry_target(entry, shown, name)
            if found is None:
                continue
            target, tst = found
            if stat.S_ISDIR(tst.st_mode):
                if (tst.st_dev, tst.st_ino) in visited:
                    report(shown / name, ProblemReason.SYMLINK_LOOP, "not descended: the directory was already walked")
                    continue
                if not visit(Path(target), f"{rel}/", shown / name):
                    return False
                continue
            if not stat.S_ISREG(tst.st_mode):
                report(shown / name, ProblemReason.SPECIAL_FILE, "not served: not a regular file")
                continue
            rel = sys.intern(rel)  # rels repeat across skills
            files.append(SkillFile(rel, tst.st_size, tst.st_mtime_ns, tst.st_ino))
            stamps.append(stamp(rel, tst))
            total += tst.st_size
            if len(files) > MAX_FILES:
                return False
        return True

    complete = visit(directory, "", directory)
    over = not complete or total > MAX_TOTAL_BYTES
    files.sort(key=lambda f: f.rel)
    return Walk(tuple(files), tuple(problems), tuple(nested), over, tuple(stamps), complete and not unpinned)


def skill_uri(skill: Skill | str, rel: str | None = None) -> str:
    """``skill://<name>`` for the skill root, ``skill://<name>/<rel>`` for a file."""
    name = skill if isinstance(skill, str) else skill.name
    if rel is None:
        return f"skill://{name}"
    return f"skill://{name}/{uri_path(rel)}"


@dataclass(frozen=True, slots=True)
class FileInfo:
    rel: str
    size: int
    digest: str  # "sha256:<64 lowercase hex>"


def _served(skill: Skill, rel: str) -> SkillFile:
    entry = skill.file(rel)
    if entry is None:
        problem = relpath_problem(rel)
        if problem is not None:
            raise SkillMcpError(Refusal.INVALID_PATH, problem, {"path": rel})
        raise SkillMcpError(Refusal.NOT_FOUND, f"{skill.name} serves no file {rel!r}", {"path": rel})
    return entry


def known_info(memo: DigestMemo, skill: Skill, entry: SkillFile) -> FileInfo | None:
    """``file_info`` when the memo already holds this entry unchanged (one ``lstat``), else None.

    Costs no read and no hash, so callers may run it on the event loop and go to a worker
    thread only when it returns None.
    """
    held = memo.known(skill, entry)
    return None if held is None else FileInfo(entry.rel, *held)


def file_info(memo: DigestMemo, skill: Skill, entry: SkillFile) -> FileInfo:
    """Size and digest of the file as it is on disk now (recomputed when it changed)."""
    known = known_info(memo, skill, entry)
    if known is not None:
        return known
    where = (skill.prefix, entry.rel)
    real, st = resolve_inside(skill.directory, entry.rel)
    fd = open_regular(real, st, entry.rel)
    hasher = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    digest = f"sha256:{hasher.hexdigest()}"
    # Remembered for the identity seen on the open descriptor; a write during the hash changes
    # the mtime, so the next answer recomputes rather than trusting a torn read.
    memo.put(where, identity(opened), digest)
    return FileInfo(entry.rel, opened.st_size, digest)


def file_digest(memo: DigestMemo, skill: Skill, entry: SkillFile) -> str:
    return file_info(memo, skill, entry).digest


@dataclass(slots=True)
class Located:
    """A listed file resolved inside its skill, not yet read: the ``stat`` the checks saw and
    either a descriptor pinning the file (``pinned``) or its resolved path (``real``).

    It owns ``pinned``: use it as a context manager, or call ``close``.
    """

    rel: str
    st: os.stat_result
    real: Path | None = None
    pinned: int | None = None

    @property
    def size(self) -> int:
        return self.st.st_size

    def close(self) -> None:
        if self.pinned is not None:
            os.close(self.pinned)
            self.pinned = None

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def locate(skill: Skill, rel: str) -> Located:
    """Check ``rel`` (listed, plain, inside the skill, a regular file) without reading a byte.

    The kernel's resolution pins the file with an ``O_PATH`` descriptor (``paths.pin_inside``);
    where that cannot decide, the portable ``resolve_inside`` runs and the path is kept.
    """
    entry = _served(skill, rel)
    pinned = pin_inside(skill.prefix[:-1] if skill.prefix != "/" else "/", entry.rel)
    if pinned is not None:
        return Located(entry.rel, pinned[1], pinned=pinned[0])
    real, st = resolve_inside(skill.directory, entry.rel)
    return Located(entry.rel, st, real=real)


def _read_fd(fd: int, limit: int) -> bytes:
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, limit + 1 - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_located(found: Located, *, max_bytes: int) -> bytes:
    """Read a located file, refusing before reading when it is larger than ``max_bytes``.

    ``open_pinned`` (or ``open_regular`` for a path) proves the descriptor read is the inode
    ``locate`` resolved, so the checks and the read are about the same file however long ago
    ``locate`` ran. Does not close ``found``.
    """
    rel, st = found.rel, found.st
    if st.st_size > max_bytes:
        raise SkillMcpError(Refusal.FILE_TOO_LARGE, f"{rel} is {st.st_size} bytes; the limit is {max_bytes}",
                            {"path": rel, "size": st.st_size, "limit": max_bytes})
    if found.pinned is not None:
        fd = open_pinned(found.pinned, st, rel)
    elif found.real is not None:
        fd = open_regular(found.real, st, rel)
    else:
        raise SkillMcpError(Refusal.FILE_CHANGED, f"{rel} was already closed", {"path": rel})
    try:
        data = _read_fd(fd, max_bytes)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise SkillMcpError(Refusal.FILE_TOO_LARGE, f"{rel} grew past {max_bytes} bytes while being read",
                            {"path": rel, "limit": max_bytes})
    return data


def read_skill_file(skill: Skill, rel: str, *, max_bytes: int) -> bytes:
    """Read one listed file, refusing before reading when it is larger than ``max_bytes``."""
    with locate(skill, rel) as found:
        return read_located(found, max_bytes=max_bytes)


def current_size(skill: Skill, rel: str) -> int:
    """The size of a listed file now, without reading it (for batch budgets)."""
    with locate(skill, rel) as found:
        return found.size


def read_body(skill: Skill, *, max_bytes: int = 1024 * 1024) -> str:
    """The Markdown body of SKILL.md (everything after the frontmatter)."""
    raw = read_skill_file(skill, SKILL_MD, max_bytes=max_bytes)
    try:
        return split(raw).body
    except FrontmatterError as exc:
        raise SkillMcpError(Refusal.FILE_CHANGED, f"SKILL.md changed since the scan: {exc}") from None
