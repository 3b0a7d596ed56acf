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
from dataclasses import dataclass
from itertools import chain, repeat
from operator import is_not, itemgetter
from pathlib import Path
from typing import Any, overload

from skill_mcp import __version__
from skill_mcp.catalog.cache import code_fingerprint
from skill_mcp.catalog.cachefile import open_owned, remove_superseded
from skill_mcp.catalog.codec import one_value
from skill_mcp.search.index import SearchIndex
from skill_mcp.search.postings import _Postings, make_postings

log = logging.getLogger("skill_mcp.search")

FORMAT = 1
MAGIC = "skill-mcp-search-index"
HEADER_BYTES = 1024
_DIGEST_BYTES = 16  # of a SHA-256: plenty against accidental damage
# Bytes per posting: doc id ('I'), score ('f'), field mask (a byte), section ('H').
_ITEMSIZES = {"I": 4, "f": 4, "H": 2}
_PER_POSTING = 11

Stamp = tuple[int, int, int, int]  # (inode, size, mtime_ns, ctime_ns) of one SKILL.md


class StoredIndexError(Exception):
    """A persisted index turned out damaged after it was opened: rebuild it, then ask again."""


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()[:_DIGEST_BYTES]


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
    """``search-<roots>-<code>.v<FORMAT>``: the roots and the code that built it, hashed apart so
    that a new release can remove the files its predecessors left for the same roots."""
    where = hashlib.sha256(json.dumps([str(r) for r in roots]).encode("utf-8")).hexdigest()[:24]
    return cache_dir / f"search-{where}-{search_fingerprint()[:24]}.v{FORMAT}"


class KeyHasher:
    """The key of one index: fed each skill's fields and SKILL.md stamp, in doc id order.

    The key is computed when asked for, over every skill at once (``catalog_key``): a warm
    start computes it for the whole catalog before its first search, where per-skill work (a
    ``repr`` of each record, two hash updates) was most of the cost; a build feeding it skill
    by skill gets the same key for the same skills."""

    def __init__(self) -> None:
        self._fields: list[Sequence[Any]] = []
        self._stamps: list[Stamp | None] = []

    @property
    def count(self) -> int:
        return len(self._fields)

    def add(self, fields: Sequence[Any], stamp: Stamp | None) -> None:
        self._fields.append(fields)
        self._stamps.append(stamp)

    def hexdigest(self) -> str:
        return catalog_key(key_columns(self._fields), self._stamps)


KEY_FORMAT = "k2"  # a key written by earlier code ("<count>:<hex>") never equals one of these
KEY_FIELDS = 6  # name, description, frontmatter text, tags, phase, body offset (``source._key_fields``)


def key_columns(records: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """Records of key fields (one per skill) as columns (one per field); ``ValueError`` for a
    record of another shape."""
    if not set(map(len, records)) <= {KEY_FIELDS}:
        raise ValueError("a key record has another shape")
    return [list(map(itemgetter(i), records)) for i in range(KEY_FIELDS)]


def catalog_key(columns: Sequence[Sequence[Any]], stamps: Sequence[Stamp | None]) -> str:
    """``k2:<count>:<sha256>`` over every skill's key fields (``columns``: per field, one value
    a skill, in doc id order) and SKILL.md stamp.

    Exactly as discriminating as hashing each record's ``repr`` was: the bytes hashed are an
    unambiguous encoding of all of it, column by column (every column with its byte length;
    a string column as its strings' lengths and their text; an integer column as 8 bytes a
    value, or as decimal text when a value needs more), so any change to any field or stamp of
    any skill changes them. Each column is one C-level join or array, not statements per
    skill. Values not of the usual types are hashed by ``repr`` instead (never the same bytes)."""
    count = len(stamps)
    hasher = hashlib.sha256(b"skill-mcp-search-key\0")
    try:
        for column in _encoded(columns, stamps):
            hasher.update(b"%d\0" % len(column))
            hasher.update(column)
    except (TypeError, ValueError):
        hasher = hashlib.sha256(b"skill-mcp-search-key repr\0")
        for record, stamp in zip(zip(*columns, strict=True), stamps, strict=True):
            hasher.update(repr((record, stamp)).encode("utf-8", "surrogatepass") + b"\n")
    return f"{KEY_FORMAT}:{count}:{hasher.hexdigest()}"


def _ints(values: Sequence[int]) -> bytes:
    """An integer column: 8 bytes a value, or decimal text when one needs more (marked apart)."""
    try:
        return b"q" + array("q", values).tobytes()
    except OverflowError:
        return b"t" + ",".join(map(str, values)).encode("ascii")


def _strings(values: Sequence[str]) -> bytes:
    """A string column: the strings joined by NUL when none holds one (nearly always), else
    their lengths and their text (marked apart)."""
    joined = "\0".join(values)
    if joined.count("\0") == max(len(values) - 1, 0):
        return b"s" + joined.encode("utf-8", "surrogatepass")
    return b"l" + array("q", map(len, values)).tobytes() + "".join(values).encode("utf-8", "surrogatepass")


def _encoded(columns: Sequence[Sequence[Any]], stamps: Sequence[Stamp | None]) -> Iterator[bytes]:
    names, descriptions, texts, tags, phases, offsets = columns
    if not len(names) == len(descriptions) == len(texts) == len(tags) == len(phases) == len(offsets) == len(stamps):
        raise ValueError("columns of different lengths")
    if not set(map(type, tags)) <= {tuple}:
        raise TypeError("tags not a tuple")
    yield _strings(names)
    yield _strings(descriptions)
    joined = b"\0".join(texts)  # JSON text: a NUL in it is escaped
    yield (
        b"s" + joined
        if joined.count(b"\0") == max(len(texts) - 1, 0)
        else b"l" + _ints(list(map(len, texts))) + b"".join(texts)
    )
    yield _ints(list(map(len, tags)))
    yield _strings(list(chain.from_iterable(tags)))
    yield _ints([-1 if p is None else len(p) for p in phases])
    yield "".join(p for p in phases if p is not None).encode("utf-8", "surrogatepass")
    yield _ints(offsets)
    yield _ints(list(map(is_not, stamps, repeat(None))))
    present = [s for s in stamps if s is not None]
    flat = list(chain.from_iterable(present))
    if len(flat) != 4 * len(present):
        raise ValueError("a stamp of another shape")
    yield _ints(flat)


def stamp_now(path: str) -> Stamp | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class _Stored(Mapping[str, _Postings]):
    """term -> postings, each read from the file and checked the first time it is asked for."""

    def __init__(self, fd: int, table: _Table, n_docs: int) -> None:
        self._fd = fd
        self._table = table.at
        self._rows = table
        self._n_docs = n_docs
        self._decoded: dict[str, _Postings] = {}
        # The descriptor lives as long as the index; a rename over the file does not affect it.
        weakref.finalize(self, os.close, fd)

    def __getitem__(self, term: str) -> _Postings:
        post = self._decoded.get(term)
        if post is None:
            i = self._table[term]
            rows = self._rows
            post = self._decoded[term] = self._decode(
                term, rows.offsets[i], rows.counts[i], rows.digests[i * _DIGEST_BYTES : (i + 1) * _DIGEST_BYTES]
            )
        return post

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, term: object) -> bool:
        return term in self._table

    def _decode(self, term: str, offset: int, n: int, digest: bytes) -> _Postings:
        size = _PER_POSTING * n
        try:
            raw = os.pread(self._fd, size, offset)
        except OSError as exc:
            raise StoredIndexError(f"the postings of {term!r} cannot be read: {exc.strerror}") from None
        if len(raw) != size or _digest(raw) != digest:
            raise StoredIndexError(f"the postings of {term!r} do not match their checksum")
        docs, scores, sections = array("I"), array("f"), array("H")
        docs.frombytes(raw[: 4 * n])
        scores.frombytes(raw[4 * n : 8 * n])
        sections.frombytes(raw[9 * n :])
        if n == 0 or docs[-1] >= self._n_docs or len(docs) != n:
            raise StoredIndexError(f"the postings of {term!r} name a skill the index does not hold")
        return make_postings(docs, scores, raw[8 * n : 9 * n], sections, self._n_docs)


def _block(fd: int, where: Any) -> bytes:
    offset, length, digest = where
    raw = os.pread(fd, length, offset)
    if len(raw) != length or _digest(raw).hex() != digest:
        raise ValueError("a table does not match its checksum")
    return raw


def _array(code: str, raw: bytes) -> array[Any]:
    out = array(code)
    out.frombytes(raw)
    return out


@dataclass(frozen=True, slots=True)
class _Table:
    """Where each term's postings are: term -> row, and per row its offset, count and digest."""

    at: dict[str, int]
    offsets: array[int]  # 'Q'
    counts: array[int]  # 'I'
    digests: bytes  # _DIGEST_BYTES per row


class _Headings(Sequence[tuple[str, ...]]):
    """doc id -> its headings, decoded when a hit needs them (one JSON line per doc)."""

    def __init__(self, lines: bytes, starts: array[int]) -> None:
        self._lines = lines
        self._starts = starts

    def __len__(self) -> int:
        return len(self._starts) - 1

    @overload
    def __getitem__(self, doc: int) -> tuple[str, ...]: ...
    @overload
    def __getitem__(self, doc: slice) -> Sequence[tuple[str, ...]]: ...

    def __getitem__(self, doc: int | slice) -> Any:
        if isinstance(doc, slice):
            return [self[i] for i in range(*doc.indices(len(self)))]
        try:  # ``one_value``: a hit decodes one short line, and ``json.loads`` costs twice the scan
            value = one_value(self._lines[self._starts[doc] : self._starts[doc + 1]].decode("utf-8"))
        except ValueError:  # not UTF-8, not one JSON value
            value = None
        if type(value) is not list:
            raise StoredIndexError(f"the headings of skill {doc} have the wrong shape")
        headings = tuple(value)
        for heading in headings:
            if type(heading) is not str:
                raise StoredIndexError(f"the headings of skill {doc} have the wrong shape")
        return headings


def _open(fd: int, header: dict[str, Any]) -> SearchIndex:
    names = json.loads(_block(fd, header["names"]))
    starts = _array("I", _block(fd, header["starts"]))
    terms = _block(fd, header["terms"]).decode("utf-8").split("\n")
    offsets, counts = _array("Q", _block(fd, header["offsets"])), _array("I", _block(fd, header["counts"]))
    digests = _block(fd, header["digests"])
    lines = _block(fd, header["headings"])
    if not (
        isinstance(names, list)
        and all(isinstance(n, str) for n in names)
        and len(starts) == len(names) + 1
        and starts[-1] == len(lines)
        and len(terms) == len(offsets) == len(counts)
        and len(digests) == _DIGEST_BYTES * len(terms)
    ):
        raise TypeError("the tables do not agree")
    table = _Table(dict(zip(terms, range(len(terms)), strict=True)), offsets, counts, digests)
    # The headings are read lazily: a hit reads a few.
    return SearchIndex(names=tuple(names), headings=_Headings(lines, starts), postings=_Stored(fd, table, len(names)))


def load(path: Path, key: str) -> SearchIndex | None:
    """The index persisted at ``path`` when it was built for ``key``, else None (a miss)."""
    opened = open_owned(path)
    if opened is None:
        return None
    fd = opened[0]
    try:
        header = json.loads(os.pread(fd, HEADER_BYTES, 0).partition(b"\n")[0])
        if (
            not isinstance(header, dict)
            or header.get("magic") != MAGIC
            or header.get("format") != FORMAT
            or header.get("version") != __version__
            or header.get("order") != sys.byteorder
            or header.get("sizes") != [array(c).itemsize for c in _ITEMSIZES]
        ):
            raise ValueError("another format, version or machine")
        if header.get("key") != key:
            os.close(fd)
            return None  # built for another catalog or other files: not an error
        return _open(fd, header)
    except (ValueError, TypeError, KeyError, OSError) as exc:
        os.close(fd)
        log.info("search index discarded", extra={"path": str(path), "why": str(exc)[:200]})
        return None


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
        remove_superseded(path)
    except (OSError, ValueError) as exc:
        log.info("search index not written", extra={"path": str(path), "why": str(exc)[:200]})
        with contextlib.suppress(OSError):
            os.unlink(name)


def _write(out: Any, key: str, index: SearchIndex) -> None:
    out.write(b" " * HEADER_BYTES)
    offset = HEADER_BYTES
    offsets, counts, digests = array("Q"), array("I"), bytearray()
    for post in index.postings.values():
        raw = b"".join((post.docs.tobytes(), post.scores.tobytes(), bytes(post.masks), post.sections.tobytes()))
        out.write(raw)
        offsets.append(offset)
        counts.append(len(post.docs))
        digests += _digest(raw)
        offset += len(raw)
    terms = list(index.postings)
    if any("\n" in t for t in terms):
        raise ValueError("a term holds a line break")  # never: terms are runs of letters and digits
    lines = [json.dumps(list(h)).encode("utf-8") for h in index.headings]
    starts = array("I", [0])
    for line in lines:
        starts.append(starts[-1] + len(line))
    blocks = {}
    for label, raw in (
        ("names", json.dumps(list(index.names)).encode("utf-8")),
        ("headings", b"".join(lines)),
        ("starts", starts.tobytes()),
        ("terms", "\n".join(terms).encode("utf-8")),
        ("offsets", offsets.tobytes()),
        ("counts", counts.tobytes()),
        ("digests", bytes(digests)),
    ):
        out.write(raw)
        blocks[label] = [offset, len(raw), _digest(raw).hex()]
        offset += len(raw)
    header = json.dumps(
        {
            "magic": MAGIC,
            "format": FORMAT,
            "version": __version__,
            "order": sys.byteorder,
            "sizes": [array(c).itemsize for c in _ITEMSIZES],
            "key": key,
            **blocks,
        }
    ).encode("utf-8")
    if len(header) >= HEADER_BYTES:
        raise ValueError("the header does not fit")
    out.seek(0)
    out.write(header.ljust(HEADER_BYTES - 1) + b"\n")


NowFn = Callable[[Path], int | None]
