"""The persistent catalog cache: a scan result is served again only while its files are unchanged.

One file per set of roots under the cache directory (``SKILL_MCP_CACHE_DIR``, else
``$XDG_CACHE_HOME/skill-mcp``, else ``~/.cache/skill-mcp``; ``SKILL_MCP_CACHE=off`` turns it
off). What it holds, per skill directory: the result of ``catalog.skill.load_skill`` (the
skill record, or the problems that refused it) and the *stamps* that result depends on - the
inode, size, mtime and ctime of the skill directory, of every directory the walk entered and
of every file it listed, SKILL.md as it was read included. Beside them, the SHA-256 digests a
pack's verification computed, each with the stamp of the file it hashed.

Rules that make it never wrong rather than usually right:

* **Validated before use, in two tiers.** An entry is used only when ``lstat`` of every stamped
  path it depends on gives the same inode, size, mtime and ctime now; anything else (a changed,
  added, removed or renamed file changes a stamp of the file or of its directory) reloads that
  skill from disk. The *listing tier* (the skill directory, every directory walked, SKILL.md:
  ``stamps`` in the entry) decides everything a listing says and is checked by every build; the
  *file tier* (every other file, a ctime in its file row) is checked with it by default, and by
  ``catalog.filetier`` before the first answer that carries the skill's file facts when the build
  leaves it (``reuse(files=False)``: a server's warm start). Discovery (which directories are
  skills) and the cross-skill passes (packs, duplicate names) run fresh on every build; only
  per-skill work is reused.
* **Never a racy entry.** A write in the same timestamp tick as our read leaves every stamp as
  it was. So an entry is written only when each of its stamps' ctime is older than the moment
  this scan began, read from the filesystem clock (the mtime of a marker file made in the cache
  directory before the scan), less a margin (``RACY_MARGIN_NS``; 2 s on filesystems that keep
  whole seconds). A file changed after that moment has a newer ctime than any stamp of it that
  was written, so it can never match one. ctime cannot be set back by a user, unlike mtime.
* **Not what a link leads to.** A result that followed a symbolic link, met an unreadable
  directory or stopped at the file limit depends on more than its stamps and is never written.
* **Corruption is a miss.** The file is named after the roots and a fingerprint of the code
  that decides scan results (another release, or changed rules under the same version, is
  another file), and starts with a header holding the format, the package version and the
  SHA-256 of the rest; any mismatch, a parse error or a wrong field discards the
  whole file and the scan runs cold (and rewrites it). The file is read only when it is a
  regular file owned by this user and writable by nobody else.
* **Concurrent writers cannot corrupt it.** A writer writes a private temporary file in the same
  directory and renames it over the old one (atomic on POSIX); readers see the old or the new
  file, whole. The last writer wins, and either is valid.

Memory: the file is read in a streaming pass (checksum and an index of where each entry is);
each entry is read and parsed only when its skill is asked for, so a warm build holds an index
(about 200 bytes a skill), not the file (about 1.5 KiB a skill).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from skill_mcp import __version__
from skill_mcp.catalog.cached import CachedFiles
from skill_mcp.catalog.cachefile import FORMAT, Span, Writer, index, marker_time, open_owned, remove_superseded
from skill_mcp.catalog.codec import decode_loaded, encode_loaded, listing_at, stamps_of
from skill_mcp.catalog.digest_memo import DigestMemo, identity
from skill_mcp.catalog.files import SKILL_MD, file_digest
from skill_mcp.catalog.filetier import files_hold
from skill_mcp.catalog.loaded import Loaded
from skill_mcp.catalog.verdicts import Verdicts
from skill_mcp.catalog.verdicts import identity as file_identity
from skill_mcp.models import Skill, SkillFile

log = logging.getLogger("skill_mcp.catalog")

RACY_MARGIN_NS = 50_000_000
READ_AHEAD = 256 * 1024  # bytes of the cache file read at once by a build (``CatalogCache._body``)
COARSE_MARGIN_NS = 2_000_000_000
_SECOND = 1_000_000_000


# The modules whose rules decide a scan result: a cache written under other rules (another
# release, or the same version string with changed code) is another cache.
_RULES = ("catalog", "models.py", "reasons.py", "paths.py")


def code_fingerprint() -> str:
    """SHA-256 over the source of every module that decides what a scan finds."""
    package = Path(__file__).resolve().parent.parent
    hasher = hashlib.sha256(__version__.encode("utf-8"))
    for name in _RULES:
        where = package / name
        for path in sorted(where.glob("*.py")) if where.is_dir() else [where]:
            hasher.update(path.name.encode("utf-8") + b"\0")
            with contextlib.suppress(OSError):
                hasher.update(path.read_bytes())
    return hasher.hexdigest()


def cache_file(cache_dir: Path, roots_real: Iterable[str]) -> Path:
    """``catalog-<roots>-<rules>.v<FORMAT>``: the cache file for this set of roots (order matters:
    it decides duplicate reports) under this code's rules, hashed apart so that a new release
    removes what its predecessors left for the same roots (``cachefile.remove_superseded``)."""
    where = hashlib.sha256(json.dumps(list(roots_real)).encode("utf-8")).hexdigest()[:24]
    return cache_dir / f"catalog-{where}-{code_fingerprint()[:24]}.v{FORMAT}"


def stamps_hold(base: str, stamps: Iterable[Any]) -> bool:
    """True when every stamped path under ``base`` is, by ``lstat``, what it was."""
    for rel, ino, size, mtime_ns, ctime_ns in stamps:
        try:
            st = os.lstat(f"{base}/{rel}" if rel else base)
        except OSError:
            return False
        if st.st_ino != ino or st.st_size != size or st.st_mtime_ns != mtime_ns or st.st_ctime_ns != ctime_ns:
            return False
    return True


def racy(ctime_ns: int, t0_ns: int) -> bool:
    margin = COARSE_MARGIN_NS if ctime_ns % _SECOND == 0 else RACY_MARGIN_NS
    return ctime_ns >= t0_ns - margin


class CatalogCache:
    """One build's view of the cache file: what it may reuse, and what it will write back."""

    def __init__(self, path: Path, *, now_ns: Callable[[Path], int | None] | None = None) -> None:
        self.path = path
        self._fd: int | None = None
        self._window = b""  # the bytes last read from the file, from offset ``_window_at``
        self._window_at = 0
        self._old_skills: dict[str, Span] = {}
        self._old_digests: dict[tuple[str, str], list[Any]] = {}
        # Entries reused from the file read (copied into the new file if one is written), and
        # the new file, opened on the first entry that is not; None while nothing changed.
        self._new_skills: dict[str, Span] = {}
        self._written: set[str] = set()
        self._writer: Writer | None = None
        self._broken = False
        self._new_digests: dict[tuple[str, str], list[Any]] = {}
        self._changed = False
        self._roots: dict[str, Path] = {}
        self.reused = 0
        self.loaded = 0
        self.verdicts: Verdicts | None = None  # the scan helper's, on a warm start (``take_verdicts``)
        # The filesystem's "now" as this scan begins; None when the directory cannot be written
        # (then nothing is written either).
        self.t0_ns = (now_ns or marker_time)(path.parent)
        opened = open_owned(path)
        if opened is None:
            self._changed = True
            return
        self._fd, size = opened
        try:
            self._old_skills, self._old_digests = index(self._fd, size)
        except (ValueError, UnicodeDecodeError, TypeError, OSError) as exc:
            log.info("catalog cache discarded", extra={"path": str(path), "why": str(exc)[:200]})
            self._old_skills, self._old_digests = {}, {}
            self._changed = True

    def take_verdicts(self, fd: int) -> None:
        """Read the scan helper's verdicts from ``fd`` (non-blocking) for this build: an entry it
        found holding in this very file skips its directory ``lstat`` calls (``catalog.verdicts``).
        The caller sets ``verdicts`` back to None before it closes ``fd``."""
        if self._fd is not None and self._old_skills:
            with contextlib.suppress(OSError):
                self.verdicts = Verdicts(fd, file_identity(self._fd), list(self._old_skills))

    @property
    def held(self) -> int:
        """How many skill entries the file read holds (0 when it was missing or discarded)."""
        return len(self._old_skills)

    def holds(self, real: str) -> bool:
        """Whether the file read has an entry for this skill directory (whether it still holds
        is for ``reuse`` to say)."""
        return real in self._old_skills

    def _root(self, root_real: str) -> Path:
        root = self._roots.get(root_real)
        if root is None:
            root = self._roots[root_real] = Path(root_real)
        return root

    def _body(self, span: Span) -> bytes:
        """The bytes of one entry."""
        window, start, end = self._entry(span)
        return window[start:end]

    def _entry(self, span: Span) -> tuple[bytes, int, int]:
        """Where one entry's bytes are: a window of the file, and the entry's start and end in it
        (the caller reads the entry there, without a copy of it). Read ahead by ``READ_AHEAD``
        bytes: a build asks for entries in about the order they were written (discovery's), so
        one ``pread`` serves a few hundred of them; memory stays one window, not the file."""
        assert self._fd is not None  # spans exist only for a file that was opened
        offset, length = span
        start = offset - self._window_at
        if start < 0 or start + length > len(self._window):
            self._window = os.pread(self._fd, max(length, READ_AHEAD), offset)
            self._window_at, start = offset, 0
        if start + length > len(self._window):
            raise ValueError("the file is shorter than it was")
        return self._window, start, start + length

    def reuse(
        self,
        real: str,
        found_at: str,
        root_real: str,
        *,
        files: bool = True,
        skill_md: tuple[int, int, int, int] | None = None,
    ) -> Loaded | None:
        """The cached result for this skill directory when its stamps still hold, else None.

        The listing tier (the directories and SKILL.md) is always checked; the file tier (every
        other file's row) too when ``files``, else it is left to ``catalog.filetier`` for the
        first answer that carries a fact about those files. ``skill_md``: the ``lstat`` of its
        SKILL.md that discovery took during this build, checked in place of another.
        """
        span = self._old_skills.get(real)
        if span is None:
            return None
        try:
            listing, stamps, frontmatter, rows = listing_at(*self._entry(span))
            if listing[0] != found_at or listing[1] != root_real:
                return None
            held = listing[2]  # SKILL.md's stamp, kept apart from the directories' (``codec.LISTING``)
            if held is None:
                skill_md = None
            else:
                if skill_md is None:  # a skill discovery did not reach (a nested one): one ``lstat`` here
                    try:
                        st = os.lstat(f"{real}/{SKILL_MD}")
                    except OSError:
                        return None
                    skill_md = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                if tuple(held) != skill_md:
                    return None
            verdicts = self.verdicts
            if not (verdicts is not None and verdicts.holds(real)) and not stamps_hold(real, stamps_of(stamps)):
                return None
            loaded = decode_loaded(
                listing, frontmatter, rows, real, self._root(root_real), root_real, skill_md=skill_md
            )
            skill = loaded.skill
            if files and skill is not None:
                cached = skill.files
                assert isinstance(cached, CachedFiles)
                if not files_hold(skill.prefix, cached, skill.frontmatter):
                    return None
        except (ValueError, KeyError, TypeError, IndexError, OSError) as exc:
            log.info("catalog cache entry discarded", extra={"skill": real, "why": str(exc)[:200]})
            return None
        self._new_skills[real] = span
        self.reused += 1
        return loaded

    def record(self, real: str, found_at: str, root_real: str, loaded: Loaded) -> None:
        """Remember a fresh result, when it may be written (stampable and not racy)."""
        self.loaded += 1
        if self.t0_ns is None or not loaded.stampable or not loaded.stamps:
            return
        t0 = self.t0_ns
        if any(racy(s[4], t0) for s in loaded.stamps):
            return
        try:
            entry = encode_loaded(loaded, found_at, root_real)
        except (ValueError, TypeError) as exc:  # a stamp that disagrees with the record, a value JSON cannot hold
            log.info("catalog cache entry not written", extra={"skill": real, "why": str(exc)[:200]})
            return
        writer = self._open_writer()
        if writer is None:
            return
        try:
            writer.add(b"S", real, entry)
        except OSError as exc:
            self._give_up(exc)
            return
        self._written.add(real)
        self._changed = True

    def _open_writer(self) -> Writer | None:
        if self._writer is None and not self._broken:
            try:
                self._writer = Writer(self.path)
            except OSError as exc:
                self._give_up(exc)
        return self._writer

    def _give_up(self, exc: OSError) -> None:
        log.info("catalog cache not written", extra={"path": str(self.path), "why": exc.strerror})
        self._broken = True
        if self._writer is not None:
            self._writer.discard()
            self._writer = None

    def digest_fn(self, memo: DigestMemo, stampable: Callable[[Skill], bool]) -> Callable[[Skill, SkillFile], str]:
        """``file_digest`` that first tries a cached digest whose file stamp still holds."""

        def digest(skill: Skill, entry: SkillFile) -> str:
            where = (skill.prefix, entry.rel)
            path = skill.prefix + entry.rel
            row = self._old_digests.get(where)
            if row is not None and stampable(skill):
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    if stat.S_ISREG(st.st_mode) and [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns] == row[:4]:
                        memo.put(where, identity(st), row[4])
                        self._new_digests[where] = row
                        return str(row[4])
            value = file_digest(memo, skill, entry)
            if stampable(skill) and self.t0_ns is not None:
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    held = memo.known(skill, entry)
                    if held is not None and held[1] == value and not racy(st.st_ctime_ns, self.t0_ns):
                        self._new_digests[where] = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, value]
                        self._changed = True
            return value

        return digest

    def close(self) -> None:
        if self._writer is not None:  # a build that failed half way writes nothing
            self._writer.discard()
            self._writer = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._window = b""

    def save(self) -> None:
        """Write what this build may keep, when it differs from the file read (atomic rename);
        then close the file read."""
        try:
            self._save()
        finally:
            self.close()

    def _save(self) -> None:
        if self.t0_ns is None:
            return
        # Unchanged: every entry kept came from the file read, and none of it was dropped.
        if (
            not self._changed
            and self._new_skills.keys() == self._old_skills.keys()
            and self._new_digests.keys() == self._old_digests.keys()
        ):
            return
        writer = self._open_writer()
        if writer is None:
            return
        try:
            for real, span in self._new_skills.items():
                if real not in self._written:
                    writer.add(b"S", real, self._body(span))
            for where, row in self._new_digests.items():
                writer.add(b"D", list(where), json.dumps(row).encode("utf-8"))
            writer.commit(len(self._new_skills.keys() | self._written))
            remove_superseded(self.path)
        except (OSError, ValueError) as exc:
            self._give_up(exc if isinstance(exc, OSError) else OSError(str(exc)))
        self._writer = None
