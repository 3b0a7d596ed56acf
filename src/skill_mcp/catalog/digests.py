"""``DigestMemo``: the digests a server already computed, valid while their file is unchanged.

Kept apart from ``catalog.files`` (which re-exports it) because a server builds one when it
starts, and nothing else of the file readers is needed before the first request (issue 8).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Skill

T = TypeVar("T")


class DigestMemo:
    """Digests of files already verified and hashed, each valid only while its file is unchanged.

    Keyed by (skill directory, relative path), each entry holds the identity the digest was
    computed for: device, inode, size and mtime as the fully checked read saw them. A later
    answer for the same entry ``lstat``s the path once and reuses the digest only when every
    one of those still matches; anything else (another inode, a link now in its place, a new
    size or mtime, a vanished file) takes the full path again: resolution inside the skill,
    the regular-file check, the open and a fresh hash. A reused digest is therefore one this
    server already published for this very entry, of the bytes it would read now (up to the
    filesystem's mtime granularity for a same-size rewrite, as with every mtime check).
    ``skill_answer`` also keeps, per skill, one answer made from its digests (a ``skills/list``
    entry), reused only while every file's identity is unchanged: about 1 KiB per skill that
    was listed, so at most about 10 MiB once a 10,000-skill catalog has been walked.
    Safe to share across threads; holds no file bytes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], tuple[tuple[int, int, int, int], str]] = {}
        # Per skill directory: the identities of all its files and an answer built from them.
        self._answers: dict[str, tuple[tuple[tuple[int, int, int, int], ...], Any]] = {}

    def get(self, where: tuple[str, str], identity: tuple[int, int, int, int]) -> str | None:
        with self._lock:
            known = self._known.get(where)
        return known[1] if known is not None and known[0] == identity else None

    def put(self, where: tuple[str, str], identity: tuple[int, int, int, int], digest: str) -> None:
        with self._lock:
            self._known[where] = (identity, digest)

    def __len__(self) -> int:
        return len(self._known)

    def skill_answer(self, skill: Skill, make: Callable[[list[tuple[str, int, str]]], T]) -> T | None:
        """``make([(rel, size, digest), ...])`` for ``skill``, kept until one of its files changes; None if not all known.

        Every call still ``lstat``s each file (so nothing it returns is stale); when all the
        identities equal the ones the remembered answer was made from, that answer is
        returned as it is (shared: callers must not mutate it). Otherwise it is made again
        from the known digests, or None when one of them must be computed first.
        """
        prefix, lstat, is_reg = skill.prefix, os.lstat, stat.S_ISREG
        identities = []
        for entry in skill.files:
            try:
                st = lstat(prefix + entry.rel)
            except OSError:
                return None
            if not is_reg(st.st_mode):
                return None
            identities.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
        now = tuple(identities)
        held = self._answers.get(prefix)
        if held is not None and held[0] == now:
            return cast("T", held[1])
        files = []
        for entry, identity in zip(skill.files, now, strict=True):
            known = self._known.get((prefix, entry.rel))
            if known is None or known[0] != identity:
                return None
            files.append((entry.rel, identity[2], known[1]))
        answer = make(files)
        self._answers[prefix] = (now, answer)
        return answer
