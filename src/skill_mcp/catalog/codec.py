"""Scan results to and from plain JSON values, for the persistent cache (``catalog.cache``).

Plain JSON, never pickle: a cache file is data, and reading one must not be able to run code.
Decoding checks each field's type and raises ``TypeError``/``ValueError``/``KeyError`` on a
shape it did not write; the cache then discards the entry and loads the skill from disk.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from skill_mcp.catalog.skill import Loaded
from skill_mcp.models import Declaration, EnvField, Problem, ScriptDecl, Skill, SkillFile
from skill_mcp.reasons import Level, ProblemReason

_INTERN_MAX = 40  # as catalog.yaml12: short strings repeat across thousands of skills


def _declaration(d: Declaration | None) -> Any:
    if d is None:
        return None
    return {"version": d.version,
            "run": [[r.script, r.interpreter, list(r.env), r.timeout, r.description] for r in d.run],
            "env": [[e.name, e.secret] for e in d.env], "egress": list(d.egress)}


def _skill(skill: Skill | None) -> Any:
    if skill is None:
        return None
    # The description is the frontmatter's own string (the loader refuses any other kind).
    return {"fm": skill.frontmatter, "off": skill.body_offset,
            "files": [[f.rel, f.size, f.mtime_ns, f.ino] for f in skill.files],
            "decl": _declaration(skill.declaration), "missing": list(skill.missing_scripts),
            "excluded": None if skill.skills_list_excluded is None else str(skill.skills_list_excluded),
            "tags": list(skill.tags), "phase": skill.phase, "pack": skill.pack}


def encode_loaded(loaded: Loaded, found_at: str, root_real: str) -> dict[str, Any]:
    # Stamps taken twice (before the read and again by the walk) are kept once when equal.
    stamps = list(dict.fromkeys(loaded.stamps))
    return {"at": found_at, "root": root_real, "stamps": [list(s) for s in stamps],
            "skill": _skill(loaded.skill),
            "problems": [[p.path, str(p.reason), p.detail, str(p.level), p.skill] for p in loaded.problems],
            "nested": [str(n) for n in loaded.nested]}


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


def _intern(value: Any) -> Any:
    """The frontmatter as parsed, with keys and short strings shared (as the YAML loader does)."""
    kind = type(value)
    if kind is str:
        return sys.intern(value) if len(value) <= _INTERN_MAX else value
    if kind is dict:
        out = {}
        for key, item in value.items():
            kind = type(item)
            if kind is str:
                item = sys.intern(item) if len(item) <= _INTERN_MAX else item
            elif kind is dict or kind is list:
                item = _intern(item)
            out[sys.intern(_str(key))] = item
        return out
    if kind is list:
        return [_intern(item) for item in value]
    return value


def _decode_declaration(raw: Any) -> Declaration | None:
    if raw is None:
        return None
    run = tuple(ScriptDecl(_str(s), _str(i), tuple(_str(e) for e in env), _int(t), _opt_str(d))
                for s, i, env, t, d in raw["run"])
    env = tuple(EnvField(_str(n), bool(secret)) for n, secret in raw["env"])
    return Declaration(_int(raw["version"]), run, env, tuple(_str(h) for h in raw["egress"]))


def _decode_skill(raw: Any, real: str, found_at: str, root: Path) -> Skill | None:
    if raw is None:
        return None
    frontmatter = raw["fm"]
    if not isinstance(frontmatter, dict):
        raise TypeError("the frontmatter is not a mapping")
    excluded = raw["excluded"]
    frontmatter = _intern(frontmatter)
    # A skill directly under its root (the common layout) is joined onto the root's Path,
    # which skips parsing the whole path again.
    name = real[len(str(root)) + 1:] if real.startswith(f"{root}/") else ""
    directory = root / name if name and "/" not in name else Path(real)
    return Skill(
        name=directory.name, directory=directory, found_at=found_at, root=root,
        frontmatter=frontmatter, description=_str(frontmatter["description"]),
        # The file is checksummed and written by this code, so rows are taken as written; a
        # wrong shape still raises (unpacking, or SkillFile's own work on ``rel``).
        files=tuple(SkillFile(sys.intern(rel), size, mtime, ino) for rel, size, mtime, ino in raw["files"]),
        body_offset=_int(raw["off"]), declaration=_decode_declaration(raw["decl"]),
        missing_scripts=tuple(_str(m) for m in raw["missing"]),
        skills_list_excluded=None if excluded is None else ProblemReason(excluded),
        tags=tuple(_str(t) for t in raw["tags"]), phase=_opt_str(raw["phase"]), pack=_opt_str(raw["pack"]),
    )


def decode_loaded(entry: dict[str, Any], real: str, root: Path) -> Loaded:
    """The ``Loaded`` of ``real`` found under ``root`` (the caller checked the entry is for both)."""
    found_at = _str(entry["at"])
    problems = tuple(Problem(_str(path), ProblemReason(reason), _str(detail), Level(level), _opt_str(skill))
                     for path, reason, detail, level, skill in entry["problems"])
    stamps = tuple(tuple(row) for row in entry["stamps"])
    return Loaded(_decode_skill(entry["skill"], real, found_at, root), problems,
                  tuple(Path(_str(n)) for n in entry["nested"]), stamps, True)
