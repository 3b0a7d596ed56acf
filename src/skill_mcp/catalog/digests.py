"""``DigestMemo``: the digests a server already computed, valid while their file is unchanged.

Kept apart from ``catalog.files`` (which re-exports it) because a server builds one when it
starts, and nothing else of the file readers is needed before the first request (issue 8).
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

    def get(self, where: tuple[str, str], identity: tuple[int, int, int, int]) -> str | None:
        with self._lock:
            known = self._known.get(where)
        return known[1] if known is not None and known[0] == identity else None

    def put(self, where: tuple[str, str], identity: tuple[int, int, int, int], digest: str) -> None:
        with self._lock:
            self._known[where] = (identity, digest)

    def __len__(self) -> int:
        return len(self._known)

    def known_files(self, skill: Skill) -> list[tuple[SkillFile, int, str]] | None:
        """``(file, size, digest)`` for every file of ``skill`` when each is known and unchanged, else None.

        The loop ``known_info`` runs per file, for a whole skill at once (one ``lstat`` each, no
        object per file): ``skills/list`` pages call it for every skill they hold.
        """
        prefix, known, out = skill.prefix, self._known, []
        lstat, is_reg = os.lstat, stat.S_ISREG
        for entry in skill.files:
            rel = entry.rel
            try:
                st = lstat(prefix + rel)
            except OSError:
                return None
            held = known.get((prefix, rel))  # a dict read is atomic; put() replaces whole tuples
            if held is None or not is_reg(st.st_mode) or held[0] != (st.st_dev, st.st_ino, st.st_size,
                                                                      st.st_mtime_ns):
                return None
            out.append((entry, st.st_size, held[1]))
        return out
