"""Scan results to and from plain JSON values, for the persistent cache (``catalog.cache``).

An entry is three JSON texts separated by tabs (a tab never occurs in JSON text): the
*listing* (where the skill was found, its listing-tier stamps, every field a listing carries,
the problems), the frontmatter, and the file rows. A warm build decodes the listing only; the
other two stay text in the record (``catalog.cached``) until an answer reads them.

Plain JSON, never pickle: a cache file is data, and reading one must not be able to run code.
Decoding checks each field's type and raises ``TypeError``/``ValueError``/``KeyError`` on a
shape it did not write; the cache then discards the entry and loads the skill from disk.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skill_mcp.catalog.cached import CachedFiles, CachedFrontmatter, Stamp, frontmatter_text
from skill_mcp.catalog.files import SKILL_MD
from skill_mcp.catalog.skill import Loaded
from skill_mcp.models import Declaration, EnvField, Problem, ScriptDecl, Skill
from skill_mcp.paths import path_under
from skill_mcp.reasons import ExtensionRule, Level, ProblemReason


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
    # The description is the frontmatter's own string (the loader refuses any other kind),
    # repeated here: a listing carries it, and the frontmatter is decoded only when read.
    return {
        "desc": skill.description,
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
    """The cache entry of ``loaded``: its listing, its frontmatter and its file rows. Its stamps are split in
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
    frontmatter = b"{}" if skill is None else frontmatter_text(skill.frontmatter)
    return b"\t".join((_dumps(head), frontmatter, _dumps(rows)))


# The JSON scanner ``json.loads`` ends in, called directly: a warm build decodes one listing per
# skill, and the wrappers (encoding detection, the Python-level decoder) cost a third of that.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def split_entry(body: bytes) -> tuple[dict[str, Any], bytes, bytes]:
    """An entry's listing (decoded, a mapping), its frontmatter and its file rows (both still
    JSON text). ``ValueError`` for anything ``encode_loaded`` does not write."""
    parts = body.split(b"\t")
    if len(parts) != 3:
        raise ValueError("an entry is not three parts")
    text = parts[0].decode("utf-8")
    try:
        entry, end = _SCAN(text, 0)
    except StopIteration:
        raise ValueError("an entry is not JSON") from None
    if end != len(text) or type(entry) is not dict:
        raise ValueError("an entry is not one JSON object")
    return entry, parts[1], parts[2]


def _strs(values: Any) -> tuple[str, ...]:
    if type(values) is not list:
        raise TypeError("expected a list of strings")
    if not values:
        return ()
    for v in values:
        if type(v) is not str:
            raise TypeError("expected a list of strings")
    return tuple(values)


def _opt_str(value: Any) -> str | None:
    if value is not None and type(value) is not str:
        raise TypeError("expected a string")
    return value


def _decode_declaration(raw: Any) -> Declaration:
    run = []
    for script, interpreter, env, timeout, description in raw["run"]:
        if type(script) is not str or type(interpreter) is not str or type(timeout) is not int:
            raise TypeError("a run row has the wrong shape")
        run.append(ScriptDecl(script, interpreter, _strs(env), timeout, _opt_str(description)))
    fields = []
    for name, secret in raw["env"]:
        if type(name) is not str:
            raise TypeError("an env row has the wrong shape")
        fields.append(EnvField(name, bool(secret)))
    version = raw["version"]
    if type(version) is not int:
        raise TypeError("expected an integer")
    return Declaration(version, tuple(run), tuple(fields), _strs(raw["egress"]))


def _decode_skill(
    raw: Any,
    frontmatter: bytes,
    rows: bytes,
    real: str,
    found_at: str,
    root: Path,
    root_real: str,
    skill_md: Stamp | None,
) -> Skill:
    # Every field is checked for the type ``_skill`` writes (a ``KeyError`` for one missing):
    # the checksum guards against damage, these against a row this code did not write.
    description = raw["desc"]
    offset = raw["off"]
    declaration = raw["decl"]
    excluded = raw["excluded"]
    phase = raw["phase"]
    pack = raw["pack"]
    if (
        type(description) is not str
        or type(offset) is not int
        or (phase is not None and type(phase) is not str)
        or (pack is not None and type(pack) is not str)
    ):
        raise TypeError("a listing field has the wrong type")
    directory = path_under(root, root_real, real)
    return Skill(
        name=directory.name,
        directory=directory,
        found_at=found_at,
        root=root,
        frontmatter=CachedFrontmatter(frontmatter, description),
        description=description,
        files=CachedFiles(rows, raw["n"], skill_md=skill_md),
        body_offset=offset,
        declaration=None if declaration is None else _decode_declaration(declaration),
        missing_scripts=_strs(raw["missing"]),
        skills_list_excluded=None if excluded is None else ExtensionRule(excluded),
        pack=pack,
        phase=phase,
        tags=_strs(raw["tags"]),
    )


def decode_loaded(
    entry: dict[str, Any],
    frontmatter: bytes,
    rows: bytes,
    real: str,
    root: Path,
    root_real: str,
    *,
    skill_md: Stamp | None = None,
) -> Loaded:
    """The ``Loaded`` of ``real`` found under ``root`` (``root_real`` as text; the caller
    checked the entry is for both), from ``split_entry``'s three parts; ``skill_md``: the stamp of
    its SKILL.md the caller found holding (kept on the file records for the search index)."""
    found_at = entry["at"]
    if type(found_at) is not str:
        raise TypeError("expected a string")
    problem_rows = entry["problems"]
    problems: tuple[Problem, ...] = ()
    if problem_rows:
        made = []
        for path, reason, detail, level, skill, rule in problem_rows:
            if type(path) is not str or type(detail) is not str:
                raise TypeError("a problem row has the wrong shape")
            made.append(Problem(path, ProblemReason(reason), detail, Level(level), _opt_str(skill), _opt_str(rule)))
        problems = tuple(made)
    # No stamps: a reused entry is written back as the bytes it was read from (``catalog.cache``),
    # so nothing asks for them again.
    raw = entry["skill"]
    nested = entry["nested"]
    nested_paths: tuple[Path, ...] = ()
    if nested:
        for n in nested:
            if type(n) is not str:
                raise TypeError("expected a string")
        nested_paths = tuple(Path(n) for n in nested)
    return Loaded(
        None if raw is None else _decode_skill(raw, frontmatter, rows, real, found_at, root, root_real, skill_md),
        problems,
        nested_paths,
        (),
        True,
    )
