"""Scan results to and from plain JSON values, for the persistent cache (``catalog.cache``).

Plain JSON, never pickle: a cache file is data, and reading one must not be able to run code.
Decoding checks each field's type and raises ``TypeError``/``ValueError``/``KeyError`` on a
shape it did not write; the cache then discards the entry and loads the skill from disk.
"""

from __future__ import annotations

import json
import json.scanner
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from skill_mcp.catalog.files import SKILL_MD
from skill_mcp.catalog.skill import Loaded
from skill_mcp.models import Declaration, EnvField, Problem, ScriptDecl, Skill, SkillFile
from skill_mcp.reasons import ExtensionRule, Level, ProblemReason


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
            except ValueError:
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


def _declaration(d: Declaration | None) -> Any:
    if d is None:
        return None
    return {
        "version": d.version,
        "run": [[r.script, r.interpreter, list(r.env), r.timeout, r.description] for r in d.run],
        "env": [[e.name, e.secret] for e in d.env],
        "egress": list(d.egress),
    }


def _skill(skill: Skill | None) -> Any:
    if skill is None:
        return None
    # The description is the frontmatter's own string (the loader refuses any other kind).
    return {
        "fm": skill.frontmatter,
        "off": skill.body_offset,
        "n": len(skill.files),
        "decl": _declaration(skill.declaration),
        "missing": list(skill.missing_scripts),
        "excluded": None if skill.skills_list_excluded is None else str(skill.skills_list_excluded),
        "tags": list(skill.tags),
        "phase": skill.phase,
        "pack": skill.pack,
    }


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def encode_loaded(loaded: Loaded, found_at: str, root_real: str) -> bytes:
    """The cache entry of ``loaded``: its listing (JSON), a tab, then its file rows (JSON; a
    tab never occurs in JSON text, so the two split without escaping). Its stamps are split in
    two tiers: the listing's ``stamps`` hold the listing tier (the skill directory, every
    directory walked, SKILL.md as read), which a warm build checks; every other served file's
    stamp rides in its file row (its ctime beside the record's inode, size and mtime), which
    ``catalog.filetier`` checks before an answer carries a fact about that skill's files, and
    which a warm build therefore need not even parse (``CachedFiles``). ``ValueError`` when a
    served file has no stamp that agrees with its record (never written then)."""
    # Stamps taken twice (before the read and again by the walk) are kept once when equal.
    stamps = list(dict.fromkeys(loaded.stamps))
    skill = loaded.skill
    served = {f.rel: f for f in skill.files} if skill is not None else {}
    listing: list[Any] = []
    ctimes: dict[str, int] = {}
    for s in stamps:
        rel = s[0]
        f = served.get(rel)
        if f is None or rel == SKILL_MD:
            listing.append(list(s))
            if f is None:
                continue
        if (f.ino, f.size, f.mtime_ns) != s[1:4] or ctimes.setdefault(rel, s[4]) != s[4]:
            raise ValueError(f"the stamp of {rel} disagrees with its record")
    if served.keys() - ctimes.keys():
        raise ValueError("a served file has no stamp")
    rows = [] if skill is None else [[f.rel, f.size, f.mtime_ns, f.ino, ctimes[f.rel]] for f in skill.files]
    head = {
        "at": found_at,
        "root": root_real,
        "stamps": listing,
        "skill": _skill(skill),
        "problems": [[p.path, str(p.reason), p.detail, str(p.level), p.skill, p.rule] for p in loaded.problems],
        "nested": [str(n) for n in loaded.nested],
    }
    return _dumps(head) + b"\t" + _dumps(rows)


# The JSON scanner ``json.loads`` ends in, called directly: a warm build decodes one listing per
# skill, and the wrappers (encoding detection, the Python-level decoder) cost a third of that.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def split_entry(body: bytes) -> tuple[dict[str, Any], bytes]:
    """An entry's listing (decoded, a mapping) and its file rows (still JSON text).
    ``ValueError`` for anything ``encode_loaded`` does not write."""
    head, tab, rows = body.partition(b"\t")
    if not tab:
        raise ValueError("an entry without file rows")
    text = head.decode("utf-8")
    try:
        entry, end = _SCAN(text, 0)
    except StopIteration:
        raise ValueError("an entry is not JSON") from None
    if end != len(text) or type(entry) is not dict:
        raise ValueError("an entry is not one JSON object")
    return entry, rows


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError("expected an integer")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _strs(values: Any) -> tuple[str, ...]:
    if type(values) is not list or not all(type(v) is str for v in values):
        raise TypeError("expected a list of strings")
    return tuple(values)


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


def _decode_declaration(raw: Any) -> Declaration | None:
    if raw is None:
        return None
    run = tuple(ScriptDecl(_str(s), _str(i), _strs(env), _int(t), _opt_str(d)) for s, i, env, t, d in raw["run"])
    env = tuple(EnvField(_str(n), bool(secret)) for n, secret in raw["env"])
    return Declaration(_int(raw["version"]), run, env, _strs(raw["egress"]))


def _decode_skill(
    raw: Any, rows: bytes, real: str, found_at: str, root: Path, root_real: str, skill_md: Stamp | None
) -> Skill | None:
    if raw is None:
        return None
    frontmatter = raw["fm"]
    if type(frontmatter) is not dict:
        raise TypeError("the frontmatter is not a mapping")
    excluded = raw["excluded"]
    frontmatter = _interned(frontmatter)
    # A skill directly under its root (the common layout) is joined onto the root's Path,
    # which skips parsing the whole path again.
    name = (
        real[len(root_real) + 1 :]
        if real.startswith(root_real) and real[len(root_real) : len(root_real) + 1] == "/"
        else ""
    )
    directory = root / name if name and "/" not in name else Path(real)
    return Skill(
        name=directory.name,
        directory=directory,
        found_at=found_at,
        root=root,
        frontmatter=frontmatter,
        description=_str(frontmatter["description"]),
        files=CachedFiles(rows, raw["n"], skill_md=skill_md),
        body_offset=_int(raw["off"]),
        declaration=_decode_declaration(raw["decl"]),
        missing_scripts=_strs(raw["missing"]),
        skills_list_excluded=None if excluded is None else ExtensionRule(excluded),
        tags=_strs(raw["tags"]),
        phase=_opt_str(raw["phase"]),
        pack=_opt_str(raw["pack"]),
    )


def decode_loaded(
    entry: dict[str, Any], rows: bytes, real: str, root: Path, root_real: str, *, skill_md: Stamp | None = None
) -> Loaded:
    """The ``Loaded`` of ``real`` found under ``root`` (``root_real`` as text; the caller
    checked the entry is for both), from ``split_entry``'s two parts; ``skill_md``: the stamp of
    its SKILL.md the caller found holding (kept on the file records for the search index)."""
    found_at = _str(entry["at"])
    problem_rows = entry["problems"]
    problems = (
        tuple(
            Problem(_str(path), ProblemReason(reason), _str(detail), Level(level), _opt_str(skill), _opt_str(rule))
            for path, reason, detail, level, skill, rule in problem_rows
        )
        if problem_rows
        else ()
    )
    # No stamps: a reused entry is written back as the bytes it was read from (``catalog.cache``),
    # so nothing asks for them again.
    nested = entry["nested"]
    return Loaded(
        _decode_skill(entry["skill"], rows, real, found_at, root, root_real, skill_md),
        problems,
        tuple(Path(_str(n)) for n in nested) if nested else (),
        (),
        True,
    )
