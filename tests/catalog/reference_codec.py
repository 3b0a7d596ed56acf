"""``catalog.codec``'s decode of a cache entry's listing as it was before its fast path: the
reference the differential test (``test_codec_differential.py``) holds the fast decode to (the
same ``Loaded``, or a refusal for the same entries)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skill_mcp.catalog.cached import CachedFiles, CachedFrontmatter, Stamp
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
