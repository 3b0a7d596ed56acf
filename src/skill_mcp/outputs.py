"""What a run hands back: the files a script wrote to its output directory, read safely.

Every run gets an empty directory for its results, ``SKILL_OUTPUT_DIR`` (``OUTPUT_DIR_NAME``
inside the run's directory, so the run's sandbox already lets it write there). After the run,
with every process of the run gone, ``collect`` reads what it left:

- by descriptor only: the directory is opened ``O_DIRECTORY | O_NOFOLLOW`` and every entry
  relative to its parent's descriptor; a name is first ``lstat``-ed through that descriptor,
  and only a regular file or a directory is opened at all (``O_NOFOLLOW | O_NONBLOCK``, so a
  link is never followed and a FIFO never blocks), then ``fstat`` must show the inode the
  ``lstat`` saw. The privileged side of the appliance reads a directory the script uid
  controls this way, and so can be made to read nothing but what the script wrote there;
- a regular file must have one link (a hard link to someone else's file is refused) and,
  when ``uid`` is given, belong to it; its bytes are read up to the size ``fstat`` gave, and a
  file that grows or shrinks while it is read is dropped, never cut;
- a name the read tools could not address (``paths.relpath_problem``: ``..``, control
  characters, a backslash, over-long names...) is dropped;
- at most ``MAX_OUTPUT_FILES`` files and ``MAX_OUTPUT_BYTES`` bytes per run, in walk order
  (sorted names, breadth first); the rest are reported as dropped with a reason, never cut
  silently. The walk looks at ``MAX_WALK_ENTRIES`` entries at most and ``MAX_WALK_DEPTH``
  levels, and says when it stopped early.

Standard library only: the launcher imports it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from skill_mcp.limits import MIB, READ_CAPS
from skill_mcp.paths import relpath_problem

OUTPUT_DIR_NAME = "out"  # inside the run's directory
OUTPUT_ENV = "SKILL_OUTPUT_DIR"
MAX_OUTPUT_FILES = 64  # files kept per run
MAX_OUTPUT_BYTES = READ_CAPS.run_outputs  # bytes kept per run
MAX_WALK_ENTRIES = 16384  # entries looked at per run; the rest are counted as not examined
MAX_WALK_DEPTH = 16  # directory levels below the output directory
MAX_DROPPED_LISTED = 64  # dropped entries named one by one; the rest are counted
RETAIN_S = 15 * 60  # how long the server keeps a run's outputs
RETAIN_BYTES = 256 * MIB  # what it keeps across runs (oldest out first)

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# Why an entry was not kept: stable values, shown to the model and the user.
LINK = "link"
SPECIAL = "not-a-regular-file"
NAME = "unaddressable-name"
HARD_LINK = "hard-link"
NOT_OWNED = "not-owned"
CHANGED = "changed-while-read"
UNREADABLE = "unreadable"
TOO_MANY = "over-file-cap"
TOO_BIG = "over-byte-cap"
TOO_DEEP = "too-deep"
NOT_EXAMINED = "not-examined"


def printable(path: str) -> str:
    """A name as a person may read it and JSON may carry it: undecodable bytes (which the walk
    holds as surrogate escapes) shown as ``\\xff``, and no more than 512 characters."""
    shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return shown if len(shown) <= 512 else shown[:509] + "..."


@dataclass(frozen=True, slots=True)
class OutputFile:
    path: str  # relative to the output directory, '/'-separated
    data: bytes
    sha256: str  # lowercase hex of ``data``

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class Dropped:
    path: str  # as the walk met it (undecodable bytes escaped), never used to open anything
    why: str


@dataclass(frozen=True, slots=True)
class Collected:
    files: tuple[OutputFile, ...] = ()
    dropped: tuple[Dropped, ...] = ()  # the first ``MAX_DROPPED_LISTED``
    dropped_count: int = 0  # every entry not kept, listed or not
    complete: bool = True  # False when the walk stopped at its entry or depth bound

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(slots=True)
class _Walk:
    uid: int | None
    max_files: int
    max_bytes: int
    files: list[OutputFile]
    dropped: list[Dropped]
    dropped_count: int = 0
    seen: int = 0
    used: int = 0
    complete: bool = True

    def drop(self, path: str, why: str) -> None:
        self.dropped_count += 1
        if len(self.dropped) < MAX_DROPPED_LISTED:
            self.dropped.append(Dropped(printable(path), why))


def collect(
    top: str, *, uid: int | None = None, max_files: int = MAX_OUTPUT_FILES, max_bytes: int = MAX_OUTPUT_BYTES
) -> Collected:
    """The regular files below ``top`` within the caps (see the module doc). Never raises for
    what a script left; an output directory that is missing or not a directory yields nothing."""
    try:
        root = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return Collected()
    walk = _Walk(uid=uid, max_files=max_files, max_bytes=max_bytes, files=[], dropped=[])
    stack: list[tuple[int, str, int]] = [(root, "", 0)]
    try:
        while stack:
            fd, prefix, depth = stack.pop(0)
            try:
                _directory(walk, fd, prefix, depth, stack)
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return Collected(tuple(walk.files), tuple(walk.dropped), walk.dropped_count, walk.complete)


def _names(fd: int) -> Iterator[str]:
    try:
        with os.scandir(fd) as entries:
            names = sorted(e.name for e in entries)
    except OSError:
        return iter(())
    return iter(names)


def _directory(walk: _Walk, fd: int, prefix: str, depth: int, stack: list[tuple[int, str, int]]) -> None:
    for name in _names(fd):
        walk.seen += 1
        rel = prefix + name
        if walk.seen > MAX_WALK_ENTRIES:
            walk.complete = False
            walk.drop(rel, NOT_EXAMINED)
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            walk.drop(rel, UNREADABLE)
            continue
        if stat.S_ISLNK(st.st_mode):
            walk.drop(rel, LINK)
        elif stat.S_ISDIR(st.st_mode):
            _subdirectory(walk, fd, name, rel, st, depth, stack)
        elif not stat.S_ISREG(st.st_mode):
            walk.drop(rel, SPECIAL)
        elif relpath_problem(rel) is not None:
            walk.drop(rel, NAME)
        else:
            _file(walk, fd, name, rel, st)


def _subdirectory(
    walk: _Walk, fd: int, name: str, rel: str, st: os.stat_result, depth: int, stack: list[tuple[int, str, int]]
) -> None:
    if depth + 1 > MAX_WALK_DEPTH:
        walk.complete = False
        walk.drop(rel + "/", TOO_DEEP)
        return
    if relpath_problem(rel) is not None:
        walk.drop(rel + "/", NAME)
        return
    try:
        sub = os.open(name, _OPEN | os.O_DIRECTORY, dir_fd=fd)
    except OSError:
        walk.drop(rel + "/", UNREADABLE)
        return
    if not _same(sub, st):
        os.close(sub)
        walk.drop(rel + "/", CHANGED)
        return
    stack.append((sub, rel + "/", depth + 1))


def _file(walk: _Walk, fd: int, name: str, rel: str, st: os.stat_result) -> None:
    if st.st_nlink != 1:
        walk.drop(rel, HARD_LINK)
        return
    if walk.uid is not None and st.st_uid != walk.uid:
        walk.drop(rel, NOT_OWNED)
        return
    if len(walk.files) >= walk.max_files:
        walk.drop(rel, TOO_MANY)
        return
    if walk.used + st.st_size > walk.max_bytes:
        walk.drop(rel, TOO_BIG)
        return
    try:
        data = _read_exactly(name, fd, st)
    except OSError:
        walk.drop(rel, UNREADABLE)
        return
    if data is None:
        walk.drop(rel, CHANGED)
        return
    walk.used += len(data)
    walk.files.append(OutputFile(rel, data, hashlib.sha256(data).hexdigest()))


def _same(fd: int, st: os.stat_result) -> bool:
    got = os.fstat(fd)
    return (got.st_dev, got.st_ino, stat.S_IFMT(got.st_mode)) == (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode))


def _read_exactly(name: str, dir_fd: int, st: os.stat_result) -> bytes | None:
    """The file's bytes when it is still the inode ``st`` describes and holds exactly its size."""
    fd = os.open(name, _OPEN, dir_fd=dir_fd)
    try:
        if not _same(fd, st) or os.fstat(fd).st_nlink != 1:
            return None
        size = st.st_size
        chunks = []
        left = size + 1  # one byte more than promised tells a file that grew
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) == size else None
    finally:
        os.close(fd)


def make_output_dir(run_dir: str, mode: int = 0o700) -> str:
    """Create the empty output directory inside ``run_dir``; its path."""
    path = os.path.join(run_dir, OUTPUT_DIR_NAME)
    os.mkdir(path, mode)
    return path


# The broker carries outputs to the server inside its reply frame: base64 per file, so a reply
# of MAX_OUTPUT_BYTES stays within the frame cap beside the two captured streams.


def to_wire(collected: Collected) -> dict[str, Any]:
    return {
        "files": [
            {"path": f.path, "sha256": f.sha256, "data": base64.b64encode(f.data).decode("ascii")}
            for f in collected.files
        ],
        "dropped": [{"path": d.path, "why": d.why} for d in collected.dropped],
        "droppedCount": collected.dropped_count,
        "complete": collected.complete,
    }


def from_wire(raw: object, *, max_files: int = MAX_OUTPUT_FILES, max_bytes: int = MAX_OUTPUT_BYTES) -> Collected:
    """Decode what ``to_wire`` made, re-checking every cap, name and digest; bad entries are dropped."""
    if not isinstance(raw, dict):
        return Collected()
    files: list[OutputFile] = []
    dropped = [
        Dropped(printable(str(d.get("path", ""))), str(d.get("why", ""))[:64])
        for d in raw.get("dropped", ())
        if isinstance(d, dict)
    ][:MAX_DROPPED_LISTED]
    extra = 0
    used = 0
    for entry in raw.get("files", ()) if isinstance(raw.get("files"), list) else ():
        data = _decoded(entry)
        if data is None or len(files) >= max_files or used + len(data) > max_bytes:
            extra += 1
            continue
        files.append(OutputFile(entry["path"], data, entry["sha256"]))
        used += len(data)
    count = raw.get("droppedCount", 0)
    count = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0
    return Collected(tuple(files), tuple(dropped), count + extra, raw.get("complete") is True)


def _decoded(entry: object) -> bytes | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or relpath_problem(entry["path"]):
        return None
    with contextlib.suppress(ValueError, TypeError):
        data = base64.b64decode(entry.get("data", ""), validate=True)
        if hashlib.sha256(data).hexdigest() == entry.get("sha256"):
            return data
    return None
