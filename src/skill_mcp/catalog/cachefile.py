"""The catalog cache's file: its format, a streaming reader that checks it, an atomic writer.

Layout: a header line padded to ``HEADER_BYTES`` (JSON: magic, format, package version, the
SHA-256 of everything after it, the number of skill entries, where the index is), then one line
per entry: ``S<TAB><JSON real directory><TAB><JSON entry>`` for a skill, ``D<TAB><JSON [prefix,
path]><TAB><JSON [ino, size, mtime_ns, ctime_ns, digest]>`` for a pack digest, and last the
index: ``I<TAB><JSON {"skills": [[real directory, offset, length], ...], "digests": [[[prefix,
path], row], ...]}>``, so a reader finds every entry without parsing a line of the file (it
only hashes it). JSON strings carry no raw tab or newline, so the framing needs no escaping.
``catalog.cache`` decides what goes in and what may be used; this module only moves bytes, and
fails closed (``ValueError``).
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

FORMAT = 5  # 2: stamps split in a listing tier and a file tier (a ctime in each file row); 3: the file rows
# after the listing, parsed only when the file tier asks for them; 4: the listing an array (its fields by
# position), SKILL.md's stamp apart from the directories', and an index of the entries at the end; 5: the
# directories' stamps a part of their own, decoded only when the scan helper gave no verdict
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
    """Check the header and the checksum in one streaming pass, and read the index.

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
    where = header.get("index")
    start = len(head[0]) + 1
    if not (
        type(where) is list
        and len(where) == 2
        and type(where[0]) is int
        and type(where[1]) is int
        and start <= where[0]
        and where[1] >= 0
        and where[0] + where[1] < size
    ):
        raise ValueError("the index is not where a file of this format has it")
    hasher = hashlib.sha256()
    offset = start
    while offset < size:
        chunk = os.pread(fd, min(_READ_CHUNK, size - offset), offset)
        if not chunk:
            raise ValueError("the file is shorter than it was")
        hasher.update(chunk)
        offset += len(chunk)
    if hasher.hexdigest() != header.get("sha256"):
        raise ValueError("the checksum does not match")
    block = os.pread(fd, where[1], where[0])
    if len(block) != where[1] or os.pread(fd, 3, where[0] - 2) != b"I\t" + block[:1]:
        raise ValueError("the index is not where a file of this format has it")
    try:
        read = json.loads(block)
    except RecursionError:  # nested past the interpreter's depth: not an index this code writes
        raise ValueError("the index is not JSON of its shape") from None
    return _read_index(read, where[0])


def _read_index(block: Any, end: int) -> tuple[dict[str, Span], dict[tuple[str, str], list[Any]]]:
    """The spans of the skill entries (each inside the entries, before the index at ``end``) and
    the digest rows an index holds; ``ValueError`` for any other shape."""
    if type(block) is not dict or type(block.get("skills")) is not list or type(block.get("digests")) is not list:
        raise ValueError("the index has the wrong shape")
    skills: dict[str, Span] = {}
    for row in block["skills"]:
        if type(row) is not list or len(row) != 3:
            raise ValueError("a skill's index row has the wrong shape")
        name, at, length = row
        if type(name) is not str or type(at) is not int or type(length) is not int or not 0 < at <= at + length < end:
            raise ValueError("a skill's index row has the wrong shape")
        skills[name] = (at, length)
    digests: dict[tuple[str, str], list[Any]] = {}
    for item in block["digests"]:
        if type(item) is not list or len(item) != 2 or type(item[0]) is not list or len(item[0]) != 2:
            raise ValueError("a digest's index row has the wrong shape")
        (prefix, rel), row = item
        if not (
            type(prefix) is str
            and type(rel) is str
            and type(row) is list
            and len(row) == 5
            and all(type(v) is int for v in row[:4])
            and type(row[4]) is str
        ):
            raise ValueError("a digest row has the wrong shape")
        digests[(prefix, rel)] = row
    return skills, digests


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
        self.at = HEADER_BYTES  # where the next line starts
        self.skills: list[Any] = []  # [real directory, offset, length] of each skill entry
        self.digests: list[bytes] = []  # each digest's index row, as JSON text

    def add(self, kind: bytes, key: Any, body: bytes) -> None:
        text = json.dumps(key).encode("utf-8")
        line = kind + b"\t" + text + b"\t" + body + b"\n"
        if kind == b"S":
            self.skills.append([key, self.at + len(kind) + len(text) + 2, len(body)])
        elif kind == b"D":
            self.digests.append(b"[" + text + b"," + body + b"]")
        else:
            raise ValueError("an unknown line kind")
        self.hasher.update(line)
        self.handle.write(line)
        self.at += len(line)

    def commit(self, skills: int) -> None:
        block = b'{"skills":' + json.dumps(self.skills).encode("utf-8") + b',"digests":['
        block += b",".join(self.digests) + b"]}"
        line = b"I\t" + block + b"\n"
        self.hasher.update(line)
        self.handle.write(line)
        header = json.dumps(
            {
                "magic": MAGIC.decode(),
                "format": FORMAT,
                "version": __version__,
                "sha256": self.hasher.hexdigest(),
                "skills": skills,
                "index": [self.at + 2, len(block)],
            }
        ).encode("utf-8")
        if len(header) >= HEADER_BYTES:
            raise ValueError("the header does not fit")
        self.handle.seek(0)
        self.handle.write(header.ljust(HEADER_BYTES - 1) + b"\n")
        self.handle.close()
        os.replace(self.name, self.path)

    def discard(self) -> None:
        self.handle.close()
        with contextlib.suppress(OSError):
            os.unlink(self.name)
