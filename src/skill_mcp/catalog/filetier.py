"""The file tier: a cached skill's file facts are checked before the first answer that carries them.

A server's warm build (``build_catalog(check_files=False)``) checks each cached result against
the stamps of its listing tier only: the skill directory, every directory its walk entered and
SKILL.md (``catalog.cache``). That decides everything a listing says (names, descriptions,
declared scripts, which files exist, the problems), because adding, removing or renaming a
file changes its directory's stamp. A file's *content* changes no directory stamp, so the facts
about the files themselves (sizes, the records the manifests and resources are made from) are
checked here, per skill, by the answers that carry them: ``stale`` ``lstat``s every file row
of a cached record (inode, size, mtime, ctime) the first time an answer asks, and marks the
record checked; a record whose rows no longer hold is reloaded from disk by the catalog's
provider (``refresh``), which replaces its cache entry, and the answer is made from the fresh
record. A record scanned from disk (not from the cache) is already checked.

An answer that also reuses known digests would ``lstat`` each file twice, once here and once in
``DigestMemo.known``; for a ``skills/list`` page ``known_checked`` does both checks on one
``lstat`` per file, and says None whenever either fails, so that the caller takes the
reference path (``stale``, a reload, the full read and hash) for the answer instead.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from skill_mcp.catalog.cached import CachedFiles, CachedFrontmatter
from skill_mcp.catalog.files import SKILL_MD

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog.digest_memo import DigestMemo
    from skill_mcp.config import Settings
    from skill_mcp.models import Catalog, Skill, SkillFile


def files_hold(prefix: str, files: CachedFiles, frontmatter: Mapping[str, Any] | None = None) -> bool:
    """True when every file row but SKILL.md's (the listing tier holds that one) has, by
    ``lstat`` of ``prefix + rel``, the inode, size, mtime and ctime it was stamped with; then
    ``files.checked`` is set, so this record is not checked again. Rows that do not decode
    (``CachedFiles.rows``), or a cached ``frontmatter`` that does not (``CachedFrontmatter``),
    fail the check: the skill is read from disk again. The answers that carry a skill's file
    facts carry its whole frontmatter too (``skill_load``, ``skills/get``), so it is decoded here,
    once, where a failure has somewhere safe to go."""
    if files.checked:
        return True
    try:
        rows = files.rows
        if isinstance(frontmatter, CachedFrontmatter):
            frontmatter.decoded()
    except ValueError:
        return False
    for rel, size, mtime_ns, ino, ctime_ns in rows:
        if rel == SKILL_MD:
            continue
        try:
            st = os.lstat(prefix + rel)
        except OSError:
            return False
        if (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != (ino, size, mtime_ns, ctime_ns):
            return False
    files.checked = True
    return True


def known_checked(memo: DigestMemo, skill: Skill) -> list[tuple[SkillFile, int, str]] | None:
    """``(file, size, digest)`` for every file of ``skill``, from one ``lstat`` per file that
    serves both checks an answer carrying digests owes: the file tier (``files_hold``: the
    row's inode, size, mtime and ctime, while the record is not yet checked; SKILL.md's row
    left to the listing tier as there) and the memo (``DigestMemo.known``: a regular file whose
    device, inode, size, mtime and ctime are those the digest was computed for). None when any file
    fails either check, is gone or was never hashed; ``checked`` is set only when every row held.
    """
    files = skill.files
    unchecked = files if isinstance(files, CachedFiles) and not files.checked else None
    try:
        rows = None if unchecked is None else unchecked.rows
        if unchecked is not None and isinstance(skill.frontmatter, CachedFrontmatter):
            skill.frontmatter.decoded()  # as files_hold: a page carries the whole frontmatter
    except ValueError:  # cached text this code never writes: the reference way reloads the skill
        return None
    prefix = skill.prefix
    held = memo.held(prefix)
    lstat, is_reg = os.lstat, stat.S_ISREG
    out = []
    for i, entry in enumerate(files):
        rel = entry.rel
        try:
            st = lstat(prefix + rel)
        except OSError:
            return None
        known = held.get(rel)
        now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # digest_memo.identity
        if known is None or known[0] != now or not is_reg(st.st_mode):
            return None
        if rows is not None and rel != SKILL_MD:
            row_rel, size, mtime_ns, ino, ctime_ns = rows[i]
            if (row_rel, ino, size, mtime_ns, ctime_ns) != (rel, *now[1:]):
                return None
        out.append((entry, now[2], known[1]))
    if unchecked is not None:
        unchecked.checked = True
    return out


def stale(skills: Iterable[Skill]) -> list[Skill]:
    """The skills among ``skills`` whose cached file facts no longer hold (each record is
    checked at most once while it holds; a scanned record is never stale)."""
    out = []
    for skill in skills:
        files = skill.files
        if isinstance(files, CachedFiles) and not files_hold(skill.prefix, files, skill.frontmatter):
            out.append(skill)
    return out


def reload_dirs(skills: Iterable[Skill]) -> frozenset[str]:
    """The real directories ``build_catalog(reload=...)`` must read from disk for ``skills``."""
    return frozenset(str(skill.directory) for skill in skills)


def rebuilt(settings: Settings, catalog: Catalog, skills: Iterable[Skill]) -> Catalog:
    """A catalog with ``skills`` read from disk again, for a provider that cannot ``refresh``
    (nothing is swapped: the answer in hand uses it)."""
    from skill_mcp.catalog.discover import build_catalog

    return build_catalog(settings, generation=catalog.generation, check_files=False, reload=reload_dirs(skills))
