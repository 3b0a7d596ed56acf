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
it was computed for; ``DigestMemo`` only remembers pure results.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from skill_mcp.catalog.frontmatter import FrontmatterError, split
from skill_mcp.errors import SkillMcpError
from skill_mcp.models import Problem, Skill, SkillFile
from skill_mcp.paths import MAX_PATH_CHARS, is_inside, open_regular, relpath_problem, resolve_inside
from skill_mcp.reasons import Level, ProblemReason, Refusal

MAX_FILES = 512
# Directories an interpreter writes next to the code it runs (pip byte-compiles an installed
# pack's scripts into them). They are build output, not the author's content: never listed,
# never served, never pinned - the one documented exception to "reported, never silent".
BUILD_OUTPUT_DIRS = frozenset({"__pycache__"})
MAX_TOTAL_BYTES = 16 * 1024 * 1024
SKILL_MD = "SKILL.md"
_CHUNK = 256 * 1024


@dataclass(frozen=True, slots=True)
class Walk:
    files: tuple[SkillFile, ...]
    problems: tuple[Problem, ...]
    nested: tuple[Path, ...]  # subdirectories (as walked) that hold their own SKILL.md
    over_limit: bool


def walk_skill(directory: Path, skill_name: str) -> Walk:
    """List the servable files of the skill whose real directory is ``directory``."""
    files: list[SkillFile] = []
    problems: list[Problem] = []
    nested: list[Path] = []
    visited: set[tuple[int, int]] = set()
    total = 0

    def report(path: Path, reason: ProblemReason, detail: str) -> None:
        problems.append(Problem(str(path), reason, detail, Level.WARNING, skill_name))

    def entry_target(entry: os.DirEntry[str], shown: Path, name: str) -> tuple[str, os.stat_result] | None:
        """The real path and stat of one entry, or None (reported) when it is not servable."""
        if not entry.is_symlink():
            # Not a link inside a real directory: its real path is the directory's plus its
            # name, so the resolution and the containment check below have nothing to do.
            try:
                return entry.path, entry.stat(follow_symlinks=False)
            except OSError:
                report(shown / name, ProblemReason.SYMLINK_ESCAPE, "not served: a link whose target does not exist")
                return None
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
        nonlocal total
        try:
            st = os.stat(real_dir)
            entries = sorted(os.scandir(real_dir), key=lambda e: e.name)
        except OSError as exc:
            report(shown, ProblemReason.UNREADABLE, f"the directory cannot be read: {exc.strerror}")
            return True
        visited.add((st.st_dev, st.st_ino))
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
            files.append(SkillFile(sys.intern(rel), tst.st_size, tst.st_mtime_ns, tst.st_ino))  # rels repeat
            total += tst.st_size
            if len(files) > MAX_FILES:
                return False
        return True

    complete = visit(directory, "", directory)
    over = not complete or total > MAX_TOTAL_BYTES
    files.sort(key=lambda f: f.rel)
    return Walk(tuple(files), tuple(problems), tuple(nested), over)


def skill_uri(skill: Skill | str, rel: str | None = None) -> str:
    """``skill://<name>`` for the skill root, ``skill://<name>/<rel>`` for a file."""
    name = skill if isinstance(skill, str) else skill.name
    if rel is None:
        return f"skill://{name}"
    return f"skill://{name}/{quote(rel, safe='/')}"


@dataclass(frozen=True, slots=True)
class FileInfo:
    rel: str
    size: int
    digest: str  # "sha256:<64 lowercase hex>"


class DigestMemo:
    """Remembers digests by file identity. Safe to share across threads; holds no file bytes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[int, int, int, int], str] = {}

    def get(self, key: tuple[int, int, int, int]) -> str | None:
        with self._lock:
            return self._known.get(key)

    def put(self, key: tuple[int, int, int, int], digest: str) -> None:
        with self._lock:
            self._known[key] = digest


def _served(skill: Skill, rel: str) -> SkillFile:
    entry = skill.file(rel)
    if entry is None:
        problem = relpath_problem(rel)
        if problem is not None:
            raise SkillMcpError(Refusal.INVALID_PATH, problem, {"path": rel})
        raise SkillMcpError(Refusal.NOT_FOUND, f"{skill.name} serves no file {rel!r}", {"path": rel})
    return entry


def file_info(memo: DigestMemo, skill: Skill, entry: SkillFile) -> FileInfo:
    """Size and digest of the file as it is on disk now (recomputed when it changed)."""
    real, st = resolve_inside(skill.directory, entry.rel)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    digest = memo.get(key)
    if digest is None:
        fd = open_regular(real, st, entry.rel)
        hasher = hashlib.sha256()
        with os.fdopen(fd, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
        digest = f"sha256:{hasher.hexdigest()}"
        memo.put(key, digest)
    return FileInfo(entry.rel, st.st_size, digest)


def file_digest(memo: DigestMemo, skill: Skill, entry: SkillFile) -> str:
    return file_info(memo, skill, entry).digest


def read_skill_file(skill: Skill, rel: str, *, max_bytes: int) -> bytes:
    """Read one listed file, refusing before reading when it is larger than ``max_bytes``."""
    entry = _served(skill, rel)
    real, st = resolve_inside(skill.directory, entry.rel)
    if st.st_size > max_bytes:
        raise SkillMcpError(Refusal.FILE_TOO_LARGE, f"{rel} is {st.st_size} bytes; the limit is {max_bytes}",
                            {"path": rel, "size": st.st_size, "limit": max_bytes})
    fd = open_regular(real, st, rel)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise SkillMcpError(Refusal.FILE_TOO_LARGE, f"{rel} grew past {max_bytes} bytes while being read",
                            {"path": rel, "limit": max_bytes})
    return data


def current_size(skill: Skill, rel: str) -> int:
    """The size of a listed file now, without reading it (for batch budgets)."""
    entry = _served(skill, rel)
    _real, st = resolve_inside(skill.directory, entry.rel)
    return st.st_size


def read_body(skill: Skill, *, max_bytes: int = 1024 * 1024) -> str:
    """The Markdown body of SKILL.md (everything after the frontmatter)."""
    raw = read_skill_file(skill, SKILL_MD, max_bytes=max_bytes)
    try:
        return split(raw).body
    except FrontmatterError as exc:
        raise SkillMcpError(Refusal.FILE_CHANGED, f"SKILL.md changed since the scan: {exc}") from None
