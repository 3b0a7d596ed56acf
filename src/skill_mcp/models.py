"""Frozen records passed between layers. Nothing here does I/O.

A ``Catalog`` is immutable once built; a reload builds a new one and swaps it. The one
exception is the digest memo (``catalog.digest_memo.DigestMemo``), a cache of pure results keyed
by file identity, held beside the catalog rather than in it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skill_mcp.reasons import ExtensionRule, Level, ProblemReason


@dataclass(frozen=True, slots=True)
class Problem:
    """Why something under a root is not (fully) served. ``path`` is the on-disk path."""

    path: str
    reason: ProblemReason
    detail: str
    level: Level = Level.ERROR
    skill: str | None = None
    # ``extension-excluded`` only: the ``ExtensionRule`` that keeps the skill out of the extension.
    rule: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "reason": str(self.reason),
            "detail": self.detail,
            "level": str(self.level),
        }
        if self.skill is not None:
            out["skill"] = self.skill
        if self.rule is not None:
            out["rule"] = self.rule
        return out


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One servable file of a skill, as seen at scan time.

    ``rel`` is the ``/``-separated path relative to the skill directory. ``size``,
    ``mtime_ns`` and ``ino`` identify the version that was scanned; readers re-stat and
    never serve a digest computed for another version.
    """

    rel: str
    size: int
    mtime_ns: int
    ino: int
    # ``rel`` as it appears in the file's ``skill://`` URI (percent-quoted where needed), made
    # once here because every manifest and listing names every file's URI.
    uri_path: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "uri_path", uri_path(self.rel))


# The characters urllib.parse.quote(safe="/") never escapes.
_URI_PLAIN = re.compile(r"[A-Za-z0-9_.~/-]*")


def uri_path(rel: str) -> str:
    """``rel`` quoted for a ``skill://`` URI (unchanged when it needs no escape)."""
    if _URI_PLAIN.fullmatch(rel):
        return rel
    from urllib.parse import quote

    return quote(rel, safe="/")


@dataclass(frozen=True, slots=True)
class ScriptDecl:
    """One row of ``mcp-host: run:`` - an entry point the author declared."""

    script: str
    interpreter: str
    env: tuple[str, ...] = ()
    timeout: int = 60
    description: str | None = None


@dataclass(frozen=True, slots=True)
class EnvField:
    """One row of ``mcp-host: env:`` - a variable proposed for the server's environment."""

    name: str
    secret: bool = False


@dataclass(frozen=True, slots=True)
class Declaration:
    """The parsed ``mcp-host:`` block. A declaration narrows; it never grants."""

    version: int
    run: tuple[ScriptDecl, ...] = ()
    env: tuple[EnvField, ...] = ()
    egress: tuple[str, ...] = ()

    def script(self, rel: str) -> ScriptDecl | None:
        for row in self.run:
            if row.script == rel:
                return row
        return None


@dataclass(frozen=True, slots=True)
class Skill:
    """A served skill. ``name`` is its directory name, never the frontmatter's."""

    name: str
    directory: Path  # real path of the skill directory
    found_at: str  # the path as discovered under its root (before symlinks), for reports
    root: Path  # real path of the root it was found under
    # The YAML as JSON, every field the author wrote. A dict when scanned; a skill taken from
    # the catalog cache holds ``catalog.cached.CachedFrontmatter``, decoded on first read (a
    # listing needs only the description).
    frontmatter: Mapping[str, Any]
    description: str
    # Sorted by rel; SKILL.md included. A tuple when scanned; a skill taken from the catalog
    # cache holds ``catalog.cached.CachedFiles``, which makes the records on first use (a
    # listing needs only how many there are).
    files: Sequence[SkillFile]
    body_offset: int  # byte offset of the Markdown body inside SKILL.md
    declaration: Declaration | None = None
    missing_scripts: tuple[str, ...] = ()  # declared but not servable
    skills_list_excluded: ExtensionRule | None = None  # why the Skills extension leaves it out
    pack: str | None = None  # name of the pack that pins it, if any
    phase: str | None = None
    tags: tuple[str, ...] = ()
    # The skill's path in the ``skill://`` namespace: its name, or for a skill nested inside
    # another one the enclosing skill's path, the directories between, then its name
    # (``parent/child``), as the Skills extension requires. Empty means the name.
    path: str = ""
    # ``directory`` as text with a trailing slash: every per-file answer joins onto it; and
    # ``skill://<path>/``, which every file URI starts with.
    prefix: str = field(init=False, repr=False, compare=False)
    uri_prefix: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", str(self.directory).rstrip("/") + "/")
        object.__setattr__(self, "uri_prefix", f"skill://{uri_path(self.skill_path)}/")

    @property
    def skill_path(self) -> str:
        """``<skill-path>`` of ``skill://<skill-path>/SKILL.md`` (not percent-quoted)."""
        return self.path or self.name

    def file(self, rel: str) -> SkillFile | None:
        for f in self.files:
            if f.rel == rel:
                return f
        return None

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True, slots=True)
class Catalog:
    """Everything a scan found: served skills by name, and every problem."""

    skills: Mapping[str, Skill]  # sorted by name
    problems: tuple[Problem, ...]
    roots: tuple[Path, ...]
    generation: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    packs: tuple[Path, ...] = ()  # real directories of every pack.json discovery reached
    # Derived once here, because every page of every listing needs them and the catalog never
    # changes: the names in order, and the skills the Skills extension publishes (in order).
    ordered: tuple[str, ...] = field(init=False, repr=False, compare=False)
    extension_listed: tuple[Skill, ...] = field(init=False, repr=False, compare=False)
    # Served skills by ``skill_path``: what a ``skill://`` URI addresses.
    by_path: Mapping[str, Skill] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ordered", tuple(self.skills))
        object.__setattr__(
            self, "extension_listed", tuple(s for s in self.skills.values() if s.skills_list_excluded is None)
        )
        object.__setattr__(self, "by_path", {s.skill_path: s for s in self.skills.values()})

    def skill_at(self, path: str) -> tuple[Skill, str | None] | None:
        """The skill a ``skill://`` path (unquoted, no scheme) addresses, and the rest of it.

        The deepest skill wins: ``parent/child/SKILL.md`` is the nested skill's SKILL.md (the same
        bytes as the enclosing skill's file there), and ``parent/child`` its root directory.
        """
        segments = path.split("/")
        for cut in range(len(segments), 0, -1):
            skill = self.by_path.get("/".join(segments[:cut]))
            if skill is not None:
                rest = "/".join(segments[cut:])
                return skill, rest if cut < len(segments) else None
        return None

    def names(self) -> tuple[str, ...]:
        return self.ordered
