"""The persisted search index: a warm start's first search reads it instead of building one.

One file per set of roots beside the catalog cache (``search-<hash>.v<FORMAT>``, the hash
over the roots, this format and the code fingerprint of the catalog and search modules). It
is served under the catalog cache's rules, so it is never wrong rather than usually right:

* **Keyed by exactly what the build read.** The *key* is a SHA-256 over every served skill in
  name order (doc id order): the fields the index takes from the catalog record (name,
  frontmatter name, description, tags, where the body starts) and the identity stamp (inode,
  size, mtime, ctime) of the SKILL.md whose body it read. A start computes the key of the
  catalog it serves (one ``lstat`` per skill, no file read) and uses the file only when its
  key is the same; anything else (a changed, added, removed or renamed skill, another
  description from a pack, a body rewritten in the same second) is a rebuild.
* **Never a racy stamp.** As in ``catalog.cache``: the file is written only when every SKILL.md
  the build read has a ctime older than the moment the build began, less a margin; so a body
  written in the same timestamp tick as our read can never hide behind an unchanged stamp.
  A body that could not be read (gone, too large) makes the index unwritable.
* **Corruption is a miss, never an answer.** The header carries the format, the package
  version, the byte order and the key; the doc table and the term table carry a SHA-256 each,
  checked when the file is opened; every term's postings carry their own, checked when a
  query first reads that term. A mismatch at open is a rebuild; a mismatch later raises
  ``StoredIndexError``, and the caller rebuilds and asks again. The file is opened only when it
  is a regular file owned by this user and writable by nobody else; its contents are arrays of
  numbers and JSON, never pickle.
* **Concurrent writers cannot corrupt it.** A private temporary file renamed over the old one.

Loading is cheap because it is lazy: opening reads the header, the names and headings and the
term table (offsets); a term's postings are read (one ``pread``) and checked the first time a
query uses that term, and its impact head is derived then, as the build derives it. Memory is
the terms queried, not the file (about 11 bytes a posting: 90 MB at 10,000 bench skills).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
import weakref
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from skill_mcp import __version__
from skill_mcp.catalog.cache import code_fingerprint
from skill_mcp.catalog.cachefile import open_owned
from skill_mcp.search.index import SearchIndex
from skill_mcp.search.postings import _Postings, make_postings

log = logging.getLogger("skill_mcp.search")

FORMAT = 1
MAGIC = "skill-mcp-search-index"
HEADER_BYTES = 1024
_DIGEST_CHARS = 32  # of a SHA-256 in hex: plenty against accidental damage, half the table
# Bytes per posting: doc id ('I'), score ('f'), field mask (a byte), section ('H').
_ITEMSIZES = {"I": 4, "f": 4, "H": 2}
_PER_POSTING = 11

Stamp = tuple[int, int, int, int]  # (inode, size, mtime_ns, ctime_ns) of one SKILL.md


class StoredIndexError(Exception):
    """A persisted index turned out damaged after it was opened: rebuild it, then ask again."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_DIGEST_CHARS]


def search_fingerprint() -> str:
    """The catalog's code fingerprint plus the source of every search module and INDEX_VERSION."""
    from skill_mcp.search import INDEX_VERSION

    hasher = hashlib.sha256(f"{code_fingerprint()}\0{INDEX_VERSION}\0{FORMAT}".encode())
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        hasher.update(path.name.encode("utf-8") + b"\0")
        with contextlib.suppress(OSError):
            hasher.update(path.read_bytes())
    return hasher.hexdigest()


def index_file(cache_dir: Path, roots: Sequence[Path]) -> Path:
    key = json.dumps([FORMAT, search_fingerprint(), [str(r) for r in roots]]).encode("utf-8")
    return cache_dir / f"search-{hashlib.sha256(key).hexdigest()[:32]}.v{FORMAT}"


class KeyHasher:
    """The key of one index: fed each skill's fields and SKILL.md stamp, in doc id order."""

    def __init__(self) -> None:
        self._hasher = hashlib.sha256(b"skill-mcp-search-key\0")
        self.count = 0

    def add(self, fields: Sequence[Any], stamp: Stamp | None) -> None:
        self._hasher.update(json.dumps([fields, stamp], ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        self._hasher.update(b"\n")
        self.count += 1

    def hexdigest(self) -> str:
        return f"{self.count}:{self._hasher.hexdigest()}"


def stamp_now(path: str) -> Stamp | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class _Stored(Mapping[str, _Postings]):
    """term -> postings, each read from the file and checked the first time it is asked for."""

    def __init__(self, fd: int, table: dict[str, list[Any]], n_docs: int) -> None:
        self._fd = fd
        self._table = table
        self._n_docs = n_docs
        self._decoded: dict[str, _Postings] = {}
        # The descriptor lives as long as the index; a rename over the file does not affect it.
        weakref.finalize(self, os.close, fd)

    def __getitem__(self, term: str) -> _Postings:
        post = self._decoded.get(term)
        if post is None:
            post = self._decoded[term] = self._decode(term, *self._table[term])
        return post

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, term: object) -> bool:
        return term in self._table

    def _decode(self, term: str, offset: int, n: int, digest: str) -> _Postings:
        size = _PER_POSTING * n
        try:
            raw = os.pread(self._fd, size, offset)
        except OSError as exc:
            raise StoredIndexError(f"the postings of {term!r} cannot be read: {exc.strerror}") from None
        if len(raw) != size or _digest(raw) != digest:
            raise StoredIndexError(f"the postings of {term!r} do not match their checksum")
        docs, scores, sections = array("I"), array("f"), array("H")
        docs.frombytes(raw[:4 * n])
        scores.frombytes(raw[4 * n:8 * n])
        sections.frombytes(raw[9 * n:])
        if n == 0 or docs[-1] >= self._n_docs:
            raise StoredIndexError(f"the postings of {term!r} name a skill the index does not hold")
        return make_postings(docs, scores, raw[8 * n:9 * n], sections, self._n_docs)


def _block(fd: int, where: Any) -> Any:
    offset, length, digest = where
    raw = os.pread(fd, length, offset)
    if len(raw) != length or _digest(raw) != digest:
        raise ValueError("a table does not match its checksum")
    return json.loads(raw)


def load(path: Path, key: str) -> SearchIndex | None:
    """The index persisted at ``path`` when it was built for ``key``, else None (a miss)."""
    opened = open_owned(path)
    if opened is None:
        return None
    fd = opened[0]
    try:
        header = json.loads(os.pread(fd, HEADER_BYTES, 0).partition(b"\n")[0])
        if not isinstance(header, dict) or header.get("magic") != MAGIC or header.get("format") != FORMAT \
                or header.get("version") != __version__ or header.get("order") != sys.byteorder \
                or header.get("sizes") != [array(c).itemsize for c in _ITEMSIZES]:
            raise ValueError("another format, version or machine")
        if header.get("key") != key:
            os.close(fd)
            return None  # built for another catalog or other files: not an error
        docs = _block(fd, header["docs"])
        names, headings = docs["names"], docs["headings"]
        if not (isinstance(names, list) and isinstance(headings, list) and len(names) == len(headings)
                and all(isinstance(n, str) for n in names)
                and all(isinstance(h, list) and all(isinstance(s, str) for s in h) for h in headings)):
            raise TypeError("the doc table has the wrong shape")
        table = _block(fd, header["terms"])
        if not isinstance(table, dict) or not all(
                isinstance(t, str) and isinstance(row, list) and len(row) == 3 and type(row[0]) is int
                and type(row[1]) is int and isinstance(row[2], str) for t, row in table.items()):
            raise TypeError("the term table has the wrong shape")
    except (ValueError, TypeError, KeyError, OSError) as exc:
        os.close(fd)
        log.info("search index discarded", extra={"path": str(path), "why": str(exc)[:200]})
        return None
    return SearchIndex(names=tuple(names), headings=tuple(map(tuple, headings)),
                       postings=_Stored(fd, table, len(names)))


def save(path: Path, key: str, index: SearchIndex) -> None:
    """Write ``index`` for ``key`` (a temporary file renamed over the old one); never raises
    for a cache directory that cannot be written."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=".search-", suffix=".tmp")
    except OSError as exc:
        log.info("search index not written", extra={"path": str(path), "why": exc.strerror})
        return
    try:
        with os.fdopen(fd, "wb") as out:
            _write(out, key, index)
        os.replace(name, path)
    except OSError as exc:
        log.info("search index not written", extra={"path": str(path), "why": exc.strerror})
        with contextlib.suppress(OSError):
            os.unlink(name)


def _write(out: Any, key: str, index: SearchIndex) -> None:
    out.write(b" " * HEADER_BYTES)
    offset = HEADER_BYTES
    table: dict[str, list[Any]] = {}
    for term, post in index.postings.items():
        raw = b"".join((post.docs.tobytes(), post.scores.tobytes(), bytes(post.masks), post.sections.tobytes()))
        out.write(raw)
        table[term] = [offset, len(post.docs), _digest(raw)]
        offset += len(raw)
    blocks = {}
    for label, value in (("docs", {"names": list(index.names), "headings": [list(h) for h in index.headings]}),
                         ("terms", table)):
        raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        out.write(raw)
        blocks[label] = [offset, len(raw), _digest(raw)]
        offset += len(raw)
    header = json.dumps({"magic": MAGIC, "format": FORMAT, "version": __version__, "order": sys.byteorder,
                         "sizes": [array(c).itemsize for c in _ITEMSIZES], "key": key, **blocks}).encode("utf-8")
    if len(header) >= HEADER_BYTES:
        raise OSError(0, "the header does not fit")
    out.seek(0)
    out.write(header.ljust(HEADER_BYTES - 1) + b"\n")


NowFn = Callable[[Path], int | None]
