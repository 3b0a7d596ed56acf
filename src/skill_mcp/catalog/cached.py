"""A cached skill's parts that a warm build keeps as JSON text, decoded the first time they are read.

A warm start decodes every skill's listing (``catalog.codec``), but a listing carries neither
the frontmatter (only the description, which the listing holds) nor the file records (only how
many there are). So each cached record holds those two as the text the cache file holds, and
decodes it on first use: ``CachedFrontmatter`` (a read-only mapping) and ``CachedFiles`` (a
sequence of ``SkillFile``). The cache file's checksum was checked when it was opened; what is
checked here is the shape, as ``catalog.codec`` checks the listing's. Text this code never
writes (a forged entry under a good checksum) raises ``ValueError`` on first use, never
becomes a value, and the file tier (``catalog.filetier``, run before every answer that
carries a skill's file facts or its whole frontmatter) takes that as a failed check: the skill
is read from disk again.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from skill_mcp.models import SkillFile


def _file_row(row: Any) -> bool:
    """Whether ``row`` is ``[rel, size, mtime_ns, ino, ctime_ns]``; its path is interned on the
    way (the same few names, ``SKILL.md`` first, recur in every skill)."""
    if (
        type(row) is list
        and len(row) == 5
        and type(row[0]) is str
        and type(row[1]) is int
        and type(row[2]) is int
        and type(row[3]) is int
        and type(row[4]) is int
    ):
        row[0] = sys.intern(row[0])
        return True
    return False


Stamp = tuple[int, int, int, int]  # (inode, size, mtime_ns, ctime_ns), as ``os.lstat`` gives them


class CachedFiles(Sequence[SkillFile]):
    """A skill's file records as the cache holds them: the JSON text of its file rows
    (``[rel, size, mtime_ns, ino, ctime_ns]``: the record and the file's stamp), decoded the first
    time anything reads a row, and made into ``SkillFile`` records the first time anything reads
    a record.

    The rows are also the skill's *file tier*: a warm build checks only the stamps of SKILL.md
    and of the directories (``catalog.cache``), so before an answer carries a fact about these
    files ``catalog.filetier`` checks every row's stamp once (``checked`` then stays True for
    this record; a reload makes another record).

    A warm start decodes every skill's listing, but most answers never look at most skills'
    files: a listing needs only how many there are (the count, written in the listing).
    So the rows are not even parsed until the file tier (or a record) asks for them. Their shape
    is checked then: text this code never writes (a forged entry under a good checksum), or
    rows that disagree with the count, raise ``ValueError`` from ``rows``, which the file tier
    takes as a failed check (the skill is read from disk again), never as records.
    ``skill_md`` is the stamp of SKILL.md this build checked for the listing tier (the search
    index's key reads it: ``search.source``). Thread-safe: two first readers may both decode;
    either result is the same.
    """

    __slots__ = ("_count", "_files", "_raw", "_rows", "checked", "skill_md")

    def __init__(self, raw: bytes, count: int, *, skill_md: Stamp | None = None, checked: bool = False) -> None:
        if type(count) is not int or count < 0:
            raise TypeError("a file count has the wrong shape")
        self._raw = raw
        self._count = count
        self.skill_md = skill_md
        self._rows: list[Any] | None = None
        self._files: tuple[SkillFile, ...] | None = None
        # True once every row's stamp was found to hold (``catalog.filetier``).
        self.checked = checked

    @property
    def rows(self) -> list[Any]:
        """``[rel, size, mtime_ns, ino, ctime_ns]`` per file, as the cache holds them (read only);
        ``ValueError`` when the cached text is not rows of that shape, as many as counted."""
        rows = self._rows
        if rows is None:
            try:
                rows = json.loads(self._raw)
            except (ValueError, RecursionError):
                raise ValueError("the file rows are not JSON") from None
            if type(rows) is not list or len(rows) != self._count or not all(_file_row(r) for r in rows):
                raise ValueError("a file row has the wrong shape")
            self._rows = rows
        return rows

    def _records(self) -> tuple[SkillFile, ...]:
        files = self._files
        if files is None:
            files = self._files = tuple(SkillFile(rel, size, mtime, ino) for rel, size, mtime, ino, _ctime in self.rows)
        return files

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> SkillFile: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[SkillFile, ...]: ...
    def __getitem__(self, index: int | slice) -> SkillFile | tuple[SkillFile, ...]:
        return self._records()[index]

    def __iter__(self) -> Iterator[SkillFile]:
        return iter(self._records())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return self._records() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._records())

    def __repr__(self) -> str:
        return repr(self._records())


class CachedFrontmatter(Mapping[str, Any]):
    """A cached skill's frontmatter (the YAML as JSON): the text of a JSON object, decoded, with
    keys and short strings shared across skills, the first time anything reads a key. A warm
    build never reads it: ``skill_list`` carries the description, which the listing holds.
    ``ValueError`` on first use when the text is not one JSON object with a string
    ``description`` equal to the listing's. Thread-safe: two first readers may both decode;
    either result is the same."""

    __slots__ = ("_description", "_value", "text")

    def __init__(self, raw: bytes, description: str) -> None:
        self.text = raw  # the JSON text, as ``frontmatter_text`` makes it (read only)
        self._description = description
        self._value: dict[str, Any] | None = None

    def decoded(self) -> dict[str, Any]:
        """The frontmatter (never mutate it), or ``ValueError`` for text this code never writes."""
        value = self._value
        if value is None:
            try:
                raw = json.loads(self.text)
            except (ValueError, RecursionError):
                raise ValueError("the frontmatter is not JSON") from None
            if type(raw) is not dict or raw.get("description") != self._description:
                raise ValueError("the frontmatter has the wrong shape")
            value = self._value = _interned(raw)
        return value

    def __getitem__(self, key: str) -> Any:
        return self.decoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.decoded())

    def __len__(self) -> int:
        return len(self.decoded())

    def __contains__(self, key: object) -> bool:
        return key in self.decoded()

    def get(self, key: str, default: Any = None) -> Any:
        return self.decoded().get(key, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.decoded() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mapping, as a dict is

    def __repr__(self) -> str:
        return repr(self.decoded())


def _interned(value: dict[str, Any]) -> dict[str, Any]:
    """The frontmatter as parsed, with keys and short strings shared across skills (as the YAML
    loader does: ``name``, ``license: MIT``, ``version: "1.0"`` repeat in thousands of them).
    JSON keys are strings. One loop per mapping, strings handled in it (a frontmatter is
    mostly strings); only a nested mapping or list costs a call."""
    out = {}
    intern = sys.intern
    for key, item in value.items():
        kind = type(item)
        if kind is str:
            if len(item) <= _INTERN_MAX:
                item = intern(item)
        elif kind is dict:
            item = _interned(item)
        elif kind is list:
            item = _interned_list(item)
        out[intern(key)] = item
    return out


def _interned_list(value: list[Any]) -> list[Any]:
    out = []
    for item in value:
        kind = type(item)
        if kind is str:
            if len(item) <= _INTERN_MAX:
                item = sys.intern(item)
        elif kind is dict:
            item = _interned(item)
        elif kind is list:
            item = _interned_list(item)
        out.append(item)
    return out


_INTERN_MAX = 40  # as catalog.yaml12: short strings repeat across thousands of skills


def frontmatter_text(frontmatter: Mapping[str, Any]) -> bytes:
    """The frontmatter as the JSON text the catalog cache writes (``catalog.codec``), which a
    cached record holds as it is: the same mapping gives the same bytes, cached or scanned.
    ``TypeError``/``ValueError`` for a mapping JSON cannot hold exactly (never written then)."""
    if isinstance(frontmatter, CachedFrontmatter):
        return frontmatter.text
    return json.dumps(dict(frontmatter), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
