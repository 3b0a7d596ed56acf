"""Verdicts: the scan helper checks a warm cache's directory stamps while the server starts.

On a warm start the first build's largest cost is the ``lstat`` of every stamped directory of
the listing tier (``cache.stamps_hold``: a skill's directory and each directory its walk
entered, a few microseconds each, about half the build at 10,000 skills). The scan helper
(``scan_helper``), forked before the handshake is answered and otherwise idle on a warm start,
does those ``lstat`` calls first, on the other core: it opens the cache file the build will
open (``cache.cache_file`` for the roots' real paths), reads its index (not its checksum: the
build checks that), and for each skill entry, in the index's order, says whether every
directory stamp held when it looked. It streams the answers over a pipe of their own, in
chunks, each tagged with the identity of the file it read (device, inode, size, mtime, ctime
of the open descriptor: a writer renames a new file over the old one, so another file has
another identity).

The build (``CatalogCache.reuse``) skips the directory ``lstat`` calls of an entry the helper
found holding in the same file, and does them itself for every other entry: one without a
verdict yet, one the helper found changed, any entry when the helper is dead, slow, or said
something this module does not read exactly (then it reads no more of it). It never waits for
the helper: it reads what has arrived, without blocking, every ``POLL_EVERY`` entries it had to
check itself. SKILL.md's stamp is compared with discovery's own ``lstat`` either way.

A verdict is an ``lstat`` taken a few milliseconds before the build's own would have been; the
build validates each entry at some moment before its first answer, and a change made after that
moment (the helper's, or the build's own) is the race every build has with a change made while
it runs: the next build sees it.

Frames (helper to server): ``v``, a 4-byte index of the chunk's first entry, a 4-byte length,
then the payload: the 40-byte identity, then one byte per entry (1 held, 0 not). ``e`` with an
empty payload ends the stream. Imported by the server before the first answer: standard library
only at the top.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

VERDICT, END = b"v", b"e"
CHUNK = 256  # entries per frame: a frame stays well under a pipe's atomic write (4 KiB)
POLL_EVERY = 16  # entries the build checks itself between two reads of the pipe
_IDENTITY = struct.Struct(">5q")
_HEAD = 9  # kind, index, length
_MAX_PAYLOAD = _IDENTITY.size + CHUNK


def identity(fd: int) -> bytes:
    """What names the file open on ``fd``: a file renamed over it is another file."""
    st = os.fstat(fd)
    return _IDENTITY.pack(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def roots_real(roots: Iterable[Path]) -> list[str]:
    """The real paths of the roots that are directories, as discovery takes them
    (``roots.real_root``): the cache file is named after them."""
    from skill_mcp.catalog.roots import real_root

    return [real for real in map(real_root, map(str, roots)) if real is not None]


# -- the helper's side ---------------------------------------------------------------------


def verify(path: Path, out: int, stop: Any = None) -> None:
    """Check the directory stamps of every entry of the cache file at ``path`` and write the
    verdicts to ``out`` (the caller closes it). ``stop()`` true: the server has given other work
    (or gone), end now. Any failure ends the stream early: no verdict is a verdict to check."""
    import json

    from skill_mcp.catalog.cache import stamps_hold
    from skill_mcp.catalog.cachefile import _read_index, open_owned
    from skill_mcp.catalog.codec import stamps_at

    opened = open_owned(path)
    if opened is None:
        return
    fd, _ = opened
    try:
        tag = identity(fd)
        head = os.pread(fd, 4096, 0).partition(b"\n")
        header = json.loads(head[0])
        where = header["index"]
        if not (type(where) is list and len(where) == 2 and all(type(v) is int and v >= 0 for v in where)):
            return
        block = os.pread(fd, where[1], where[0])
        if len(block) != where[1]:
            return
        skills, _ = _read_index(json.loads(block), where[0])
        window, window_at = b"", 0
        names = list(skills.items())
        for first in range(0, len(names), CHUNK):
            if stop is not None and stop():
                return
            bits = bytearray()
            for real, (offset, length) in names[first : first + CHUNK]:
                start = offset - window_at
                if start < 0 or start + length > len(window):
                    window, window_at, start = os.pread(fd, max(length, 256 * 1024), offset), offset, 0
                held = 0
                with contextlib.suppress(ValueError, TypeError, IndexError, KeyError):
                    held = 1 if stamps_hold(real, stamps_at(window, start, start + length)) else 0
                bits.append(held)
            payload = tag + bytes(bits)
            _write_all(out, VERDICT + first.to_bytes(4, "big") + len(payload).to_bytes(4, "big") + payload)
        _write_all(out, END + bytes(8))
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- the server's side ---------------------------------------------------------------------


class Verdicts:
    """What the helper found holding, read as it arrives and never waited for."""

    __slots__ = ("_buffer", "_fd", "_misses", "_names", "_tag", "held")

    def __init__(self, fd: int, tag: bytes, names: list[str]) -> None:
        self._fd: int | None = fd  # non-blocking; closed by the owner (the helper's close)
        self._tag = tag
        self._names = names  # the cache file's entries in its index's order
        self._buffer = b""
        self._misses = 0
        self.held: set[str] = set()

    def holds(self, real: str) -> bool:
        """True when the helper found this entry's directory stamps holding."""
        if real in self.held:
            return True
        if self._fd is not None:
            self._misses += 1
            if self._misses % POLL_EVERY == 1:
                self.read()
                return real in self.held
        return False

    def read(self) -> None:
        """Take what has arrived (without waiting); stop reading at the end, or at anything
        that is not a frame of ours exactly."""
        while self._fd is not None:
            try:
                got = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self._stop()
                return
            if not got:
                self._stop()
                return
            self._buffer += got
            if not self._frames():
                self._stop()
                return

    def _frames(self) -> bool:
        """Apply each whole frame buffered; False at garbage or the end."""
        buffer, at = self._buffer, 0
        while len(buffer) - at >= _HEAD:
            kind = buffer[at : at + 1]
            first = int.from_bytes(buffer[at + 1 : at + 5], "big")
            length = int.from_bytes(buffer[at + 5 : at + 9], "big")
            if kind == END:
                return False
            if kind != VERDICT or not _IDENTITY.size < length <= _MAX_PAYLOAD:
                return False
            if len(buffer) - at - _HEAD < length:
                break
            payload = buffer[at + _HEAD : at + _HEAD + length]
            at += _HEAD + length
            if payload[: _IDENTITY.size] != self._tag:
                return False  # about another file: nothing from this stream applies
            bits = payload[_IDENTITY.size :]
            if first % CHUNK or len(bits) != min(CHUNK, len(self._names) - first) or bits.strip(b"\0\1"):
                return False
            names = self._names
            self.held.update(names[first + i] for i, bit in enumerate(bits) if bit == 1)
        self._buffer = buffer[at:]
        return True

    def _stop(self) -> None:
        self._fd = None
        self._buffer = b""
