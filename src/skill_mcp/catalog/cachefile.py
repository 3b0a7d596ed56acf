"""The catalog cache's file: its format, a streaming reader that checks it, an atomic writer.

Layout: a header line padded to ``HEADER_BYTES`` (JSON: magic, format, package version, the
SHA-256 of everything after it, the number of skill entries), then one line per entry:
``S<TAB><JSON real directory><TAB><JSON entry>`` for a skill, ``D<TAB><JSON [prefix, path]>
<TAB><JSON [ino, size, mtime_ns, ctime_ns, digest]>`` for a pack digest. JSON strings carry no
raw tab or newline, so the framing needs no escaping. ``catalog.cache`` decides what goes in
and what may be used; this module only moves bytes, and fails closed (``ValueError``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from skill_mcp import __version__

log = logging.getLogger("skill_mcp.catalog")

FORMAT = 4  # 2: stamps split in a listing tier and a file tier (a ctime in each file row); 3: the file rows
# after the listing, parsed only when the file tier asks for them; 4: the listing an array (its fields by
# position), SKILL.md's stamp apart from the directories'
MAGIC = b"skill-mcp-catalog-cache"
MAX_CACHE_BYTES = 1024 * 1024 * 1024
HEADER_BYTES = 512
_READ_CHUNK = 1024 * 1024


def open_owned(path: Path) -> tuple[int, int] | None:
    """A descriptor and size of the file when it is a regular file of ours nobody else can write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022 or st.st_size > MAX_CACHE_BYTES:
        os.close(fd)
        log.info("catalog cache ignored: not a private regular file", extra={"path": str(path)})
        return None
    return fd, st.st_size


Span = tuple[int, int]  # (offset, length) of a skill entry's JSON inside the cache file


def index(fd: int, size: int) -> tuple[dict[str, Span], dict[tuple[str, str], list[Any]]]:
    """Check the header and the checksum in one streaming pass, and index the entries.

    Skill entries are not kept, only where they are: each is read and parsed when its skill is
    asked for, so the file costs a few MiB of index, not its size, in memory. Writers never
    change a cache file in place (they rename a new one over it), so the open descriptor keeps
    reading the bytes checked here. Raises ValueError.
    """
    head = os.pread(fd, 4096, 0).partition(b"\n")
    header = json.loads(head[0])
    if (
        not isinstance(header, dict)
        or header.get("magic") != MAGIC.decode()
        or header.get("format") != FORMAT
        or header.get("version") != __version__
        or not head[1]
    ):
        raise ValueError("another format or version")
    hasher = hashlib.sha256()
    skills: dict[str, Span] = {}
    digests: dict[tuple[str, str], list[Any]] = {}
    offset = len(head[0]) + 1
    carry = b""
    while offset < size or carry:
        chunk = os.pread(fd, min(_READ_CHUNK, size - offset), offset) if offset < size else b""
        if offset < size and not chunk:
            raise ValueError("the file is shorter than it was")
        hasher.update(chunk)
        start = offset - len(carry)  # the file offset of ``buffer[0]``
        offset += len(chunk)
        buffer = carry + chunk
        # Each line found in place (no copy of it): only a skill's key is cut out of it.
        at = 0
        while True:
            end = buffer.find(b"\n", at)
            if end < 0:
                break
            if end > at:
                _index_line(buffer, at, end, start, skills, digests)
            at = end + 1
        if not chunk:
            if at < len(buffer):
                _index_line(buffer, at, len(buffer), start, skills, digests)
            carry = b""
            break
        carry = buffer[at:]
    if carry or hasher.hexdigest() != header.get("sha256"):
        raise ValueError("the checksum does not match")
    return skills, digests


def _index_line(
    buffer: bytes, at: int, end: int, start: int, skills: dict[str, Span], digests: dict[tuple[str, str], list[Any]]
) -> None:
    """Index the line ``buffer[at:end]`` (``buffer[0]`` is at file offset ``start``)."""
    first = buffer.find(b"\t", at, end)
    second = buffer.find(b"\t", first + 1, end) if first >= 0 else -1
    if second < 0:
        raise ValueError("a line is not three parts")
    kind = buffer[at:first]
    key = buffer[first + 1 : second]
    if kind == b"S":
        # A key without escapes (almost every path) is its own text between the quotes.
        name = (
            key[1:-1].decode("utf-8")
            if b"\\" not in key and key.count(b'"') == 2 and key[:1] == key[-1:] == b'"'
            else json.loads(key)
        )
        if type(name) is not str:
            raise ValueError("a skill key is not a string")
        skills[name] = (start + second + 1, end - second - 1)
    elif kind == b"D":
        row = json.loads(buffer[second + 1 : end])
        if not (
            isinstance(row, list) and len(row) == 5 and all(type(v) is int for v in row[:4]) and isinstance(row[4], str)
        ):
            raise ValueError("a digest row has the wrong shape")
        prefix, rel = json.loads(key)
        digests[(prefix, rel)] = row
    else:
        raise ValueError("an unknown line kind")


def remove_superseded(path: Path) -> None:
    """Remove the files older code wrote for the same roots: ``path`` is named
    ``<kind>-<roots>-<code>.v<format>``, and a sibling with the same ``<kind>-<roots>-`` but other
    code is one no release of this code will read again (a catalog cache or a search index is
    megabytes at thousands of skills). Only our own regular files; a server still reading one
    keeps its open descriptor, and one still writing renames a new file later (last writer wins,
    as ever)."""
    prefix = path.name.rsplit("-", 1)[0] + "-"
    with contextlib.suppress(OSError), os.scandir(path.parent) as entries:
        for entry in entries:
            if (
                entry.name.startswith(prefix)
                and entry.name != path.name
                and not entry.name.endswith(".tmp")
                and entry.is_file(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_uid == os.geteuid()
            ):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def marker_time(directory: Path) -> int | None:
    """The filesystem clock now: the mtime of a file made (and removed) in ``directory``."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=directory, prefix=".clock-")
    except OSError:
        return None
    try:
        os.write(fd, b"t")
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)


class Writer:
    """A new cache file, written as the build goes (nothing held in memory): a private
    temporary file in the cache directory, a fixed-size header written last (it carries the
    checksum of what follows), then an atomic rename over the old file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hasher = hashlib.sha256()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, self.name = tempfile.mkstemp(dir=path.parent, prefix=".catalog-", suffix=".tmp")
        self.handle = os.fdopen(fd, "wb")
        self.handle.write(b" " * HEADER_BYTES)

    def add(self, kind: bytes, key: Any, body: bytes) -> None:
        line = kind + b"\t" + json.dumps(key).encode("utf-8") + b"\t" + body + b"\n"
        self.hasher.update(line)
        self.handle.write(line)

    def commit(self, skills: int) -> None:
        header = json.dumps(
            {
                "magic": MAGIC.decode(),
                "format": FORMAT,
                "version": __version__,
                "sha256": self.hasher.hexdigest(),
                "skills": skills,
            }
        ).encode("utf-8")
        self.handle.seek(0)
        self.handle.write(header.ljust(HEADER_BYTES - 1) + b"\n")
        self.handle.close()
        os.replace(self.name, self.path)

    def discard(self) -> None:
        self.handle.close()
        with contextlib.suppress(OSError):
            os.unlink(self.name)
