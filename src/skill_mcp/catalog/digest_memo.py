"""``DigestMemo``: the digests a server already computed, valid while their file is unchanged.

Kept apart from ``catalog.files`` (which re-exports it) because a server builds one when it
starts, and nothing else of the file readers is needed before the first request,
so start-up stays independent of the number of skills.
"""

from __future__ import annotations

import os
import stat
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Skill, SkillFile


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
    Safe to share across threads; holds no file bytes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], tuple[tuple[int, int, int, int], str]] = {}

    def put(self, where: tuple[str, str], identity: tuple[int, int, int, int], digest: str) -> None:
        with self._lock:
            self._known[where] = (identity, digest)

    def __len__(self) -> int:
        return len(self._known)

    def known(self, skill: Skill, entry: SkillFile) -> tuple[int, str] | None:
        """``(size, digest)`` of ``entry`` when its digest is known for the file as it is now, else None.

        One ``lstat``; no read, no hash. None covers every case the full path must decide: never
        hashed, changed, replaced by a link or anything else, gone.
        """
        try:
            st = os.lstat(skill.prefix + entry.rel)
        except OSError:
            return None
        held = self._known.get((skill.prefix, entry.rel))  # a dict read is atomic; put() replaces whole tuples
        if held is None or not stat.S_ISREG(st.st_mode) or held[0] != identity(st):
            return None
        return st.st_size, held[1]

    def known_files(self, skill: Skill) -> list[tuple[SkillFile, int, str]] | None:
        """``(file, size, digest)`` for every file of ``skill`` when each is ``known``, else None."""
        out = []
        for entry in skill.files:
            held = self.known(skill, entry)
            if held is None:
                return None
            out.append((entry, *held))
        return out


def identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """What a digest is valid for: device, inode, size and mtime."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
