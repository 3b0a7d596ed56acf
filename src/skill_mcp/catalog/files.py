"""A skill's files: their stamps, URIs, digests and every read of them (the walk that lists
them is ``catalog.walk``).

Reads re-check everything against the disk (``paths.resolve_inside`` then
``paths.open_regular``) and serve only files the scan listed. Digests are never stale: a
digest is recomputed whenever the file's identity (inode, size, mtime) differs from the one
it was computed for; ``DigestMemo`` only remembers digests of entries it verified.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from skill_mcp.catalog.digest_memo import DigestMemo as DigestMemo  # re-exported: readers take one
from skill_mcp.catalog.digest_memo import identity
from skill_mcp.catalog.frontmatter import FrontmatterError, split
from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import READ_CAPS
from skill_mcp.models import Skill, SkillFile, uri_path
from skill_mcp.paths import (
    open_pinned,
    open_regular,
    pin_inside,
    relpath_problem,
    resolve_inside,
)
from skill_mcp.reasons import Refusal

SKILL_MD = "SKILL.md"
_CHUNK = 256 * 1024


# What a scan result depends on, per directory and file it looked at: (path relative to the
# skill, "" for the skill directory; inode, size, mtime_ns, ctime_ns). The persistent cache
# (``catalog.cache``) serves a result again only while every stamp still matches.
Stamp = tuple[str, int, int, int, int]


def stamp(rel: str, st: os.stat_result) -> Stamp:
    return (rel, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def skill_uri(skill: Skill | str, rel: str | None = None) -> str:
    """``skill://<path>`` for the skill root, ``skill://<path>/<rel>`` for a file (a name given as
    text is a skill's name, which is its path unless it is nested)."""
    prefix = f"skill://{skill}/" if isinstance(skill, str) else skill.uri_prefix
    if rel is None:
        return prefix[:-1]
    return prefix + uri_path(rel)


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
        raise SkillMcpError(
            Refusal.FILE_TOO_LARGE,
            f"{rel} is {st.st_size} bytes; the limit is {max_bytes}",
            {"path": rel, "size": st.st_size, "limit": max_bytes},
        )
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
        raise SkillMcpError(
            Refusal.FILE_TOO_LARGE,
            f"{rel} grew past {max_bytes} bytes while being read",
            {"path": rel, "limit": max_bytes},
        )
    return data


def read_skill_file(skill: Skill, rel: str, *, max_bytes: int) -> bytes:
    """Read one listed file, refusing before reading when it is larger than ``max_bytes``."""
    with locate(skill, rel) as found:
        return read_located(found, max_bytes=max_bytes)


def current_size(skill: Skill, rel: str) -> int:
    """The size of a listed file now, without reading it (for batch budgets)."""
    with locate(skill, rel) as found:
        return found.size


def read_body(skill: Skill, *, max_bytes: int = READ_CAPS.skill_md) -> str:
    """The Markdown body of SKILL.md (everything after the frontmatter)."""
    raw = read_skill_file(skill, SKILL_MD, max_bytes=max_bytes)
    try:
        return split(raw).body
    except FrontmatterError as exc:
        raise SkillMcpError(Refusal.FILE_CHANGED, f"SKILL.md changed since the scan: {exc}") from None
