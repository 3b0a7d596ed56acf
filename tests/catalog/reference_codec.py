"""``catalog.codec`` as it was before its fast paths: the decode of a cache entry's listing (an
object then, format 3), the reference the differential test (``test_codec_differential.py``)
holds the fast decode to (the same ``Loaded``, or a refusal for the same entries); and the
encoder of that format (``encode_loaded``), which the same test holds the array listing's
encoder to, field by field (``as_object``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skill_mcp.catalog.cached import CachedFiles, CachedFrontmatter, Stamp, frontmatter_text
from skill_mcp.catalog.files import SKILL_MD
from skill_mcp.catalog.skill import Loaded
from skill_mcp.models import Declaration, EnvField, Problem, ScriptDecl, Skill
from skill_mcp.reasons import ExtensionRule, Level, ProblemReason


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


def _decode_declaration(raw: Any) -> Declaration | None:
    if raw is None:
        return None
    run = tuple(ScriptDecl(_str(s), _str(i), _strs(env), _int(t), _opt_str(d)) for s, i, env, t, d in raw["run"])
    env = tuple(EnvField(_str(n), bool(secret)) for n, secret in raw["env"])
    return Declaration(_int(raw["version"]), run, env, _strs(raw["egress"]))


def _decode_skill(
    raw: Any,
    frontmatter: bytes,
    rows: bytes,
    real: str,
    found_at: str,
    root: Path,
    root_real: str,
    skill_md: Stamp | None,
) -> Skill | None:
    if raw is None:
        return None
    excluded = raw["excluded"]
    description = _str(raw["desc"])
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
        frontmatter=CachedFrontmatter(frontmatter, description),
        description=description,
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
        _decode_skill(entry["skill"], frontmatter, rows, real, found_at, root, root_real, skill_md),
        problems,
        tuple(Path(_str(n)) for n in nested) if nested else (),
        (),
        True,
    )


# The encoder of format 3 (the listing a JSON object), as ``catalog.codec`` had it.


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


def split_entry(body: bytes) -> tuple[dict[str, Any], bytes, bytes]:
    parts = body.split(b"\t")
    if len(parts) != 3:
        raise ValueError("an entry is not three parts")
    entry = json.loads(parts[0])
    if type(entry) is not dict:
        raise ValueError("an entry is not one JSON object")
    return entry, parts[1], parts[2]
