"""``DigestMemo``: the digests a server already computed, valid while their file is unchanged.

Kept apart from ``catalog.files`` (which re-exports it) because a server builds one when it
starts, and nothing else of the file readers is needed before the first request,
so start-up stays independent of the number of skills.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Skill, SkillFile


# What a digest is valid for: device, inode, size, mtime and ctime (``identity``).
Identity = tuple[int, int, int, int, int]
_NONE: Mapping[str, tuple[Identity, str]] = MappingProxyType({})


class DigestMemo:
    """Digests of files already verified and hashed, each valid only while its file is unchanged.

    Keyed by (skill directory, relative path), each entry holds the identity the digest was
    computed for: device, inode, size, mtime and ctime as the fully checked read saw them. A
    later answer for the same entry ``lstat``s the path once and reuses the digest only when
    every one of those still matches; anything else (another inode, a link now in its place, a
    new size, mtime or ctime, a vanished file) takes the full path again: resolution inside the
    skill, the regular-file check, the open and a fresh hash. A reused digest is therefore one
    this server already published for this very entry, of the bytes it would read now: a
    same-size rewrite with its mtime put back still moves the ctime (a rewrite within the
    filesystem's clock tick of the hash itself is the limit of this check, as of every stamp).
    Safe to share across threads; holds no file bytes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # skill prefix -> rel -> (identity, digest): a page looks its skills up once each, and a
        # skill's entries sit together (cheaper per file than one table keyed by (prefix, rel)).
        self._known: dict[str, dict[str, tuple[Identity, str]]] = {}

    def put(self, where: tuple[str, str], identity: Identity, digest: str) -> None:
        prefix, rel = where
        with self._lock:
            held = self._known.get(prefix)
            if held is None:
                held = self._known[prefix] = {}
            held[rel] = (identity, digest)

    def __len__(self) -> int:
        return sum(len(held) for held in list(self._known.values()))

    def held(self, prefix: str) -> Mapping[str, tuple[Identity, str]]:
        """The entries of the skill at ``prefix`` as ``rel -> (identity, digest)``, for a caller
        that checks each identity against its own ``lstat`` (``catalog.filetier.known_checked``).
        Read only; dict reads are atomic and ``put`` replaces whole tuples."""
        return self._known.get(prefix, _NONE)

    def known(self, skill: Skill, entry: SkillFile) -> tuple[int, str] | None:
        """``(size, digest)`` of ``entry`` when its digest is known for the file as it is now, else None.

        One ``lstat``; no read, no hash. None covers every case the full path must decide: never
        hashed, changed, replaced by a link or anything else, gone.
        """
        try:
            st = os.lstat(skill.prefix + entry.rel)
        except OSError:
            return None
        held = self.held(skill.prefix).get(entry.rel)
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


def identity(st: os.stat_result) -> Identity:
    """What a digest is valid for: device, inode, size, mtime and ctime. The ctime catches a
    same-size rewrite whose mtime was put back (``touch -d``, a copy tool keeping times): no
    call can set it, every write and rename moves it."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
