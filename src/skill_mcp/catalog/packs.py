"""Packs: a directory holding ``pack.json`` pins each of its skills, file by file, by SHA-256.

Schema (``schemaVersion`` 1; docs/packs.md is the reference)::

    {
      "schemaVersion": 1,
      "name": "my-pack",
      "version": "1.2.0",
      "description": "optional",
      "skills": [
        {"name": "pdf", "path": "skills/pdf", "phase": "optional", "tags": ["optional"],
         "files": {"SKILL.md": "sha256:<64 hex>", "scripts/fill.py": "sha256:<64 hex>"}}
      ]
    }

Reading is strict and fails closed: a ``pack.json`` that does not parse or does not match the
schema refuses the pack (``pack-invalid``), an unknown ``schemaVersion`` refuses it
(``pack-version``), and a refused pack's skills are not served, because their pins cannot be
checked. A skill whose files differ from its pins in any way (a changed byte, a file added,
a file removed) is refused (``digest-mismatch``); its neighbours are unaffected. A skill found
inside a pack but not listed in it has no pins and is refused the same way.

``lock_pack`` writes the file: deterministic (sorted keys and entries, fixed indentation, a
final newline), so locking twice gives byte-identical output.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from skill_mcp.catalog.files import DigestMemo, file_digest
from skill_mcp.errors import SkillMcpError
from skill_mcp.jsonbound import MAX_DEPTH, depth_within
from skill_mcp.limits import READ_CAPS
from skill_mcp.models import Problem, Skill, SkillFile
from skill_mcp.paths import is_inside, relpath_problem
from skill_mcp.reasons import Level, ProblemReason

PACK_JSON = "pack.json"
SCHEMA_VERSION = 1
PACK_JSON_MAX_BYTES = READ_CAPS.pack_json
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
MAX_LISTED = 5  # differing files named in one problem's detail

DigestFn = Callable[[Skill, SkillFile], str]


@dataclass(frozen=True, slots=True)
class PinnedSkill:
    name: str
    path: str  # "/"-separated, relative to the pack directory; "." when the pack is the skill
    files: Mapping[str, str]  # rel -> "sha256:<hex>"
    phase: str | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pack:
    name: str
    version: str
    directory: Path  # real path of the directory holding pack.json
    skills: tuple[PinnedSkill, ...]
    description: str | None = None

    def pinned_at(self, skill_dir: Path) -> PinnedSkill | None:
        """The entry pinning the skill whose real directory is ``skill_dir``, if any."""
        rel = _rel_to(self.directory, skill_dir)
        for entry in self.skills:
            if entry.path == rel:
                return entry
        return None


def _rel_to(base: Path, target: Path) -> str | None:
    if not is_inside(base, target):
        return None
    rel = target.relative_to(base).as_posix()
    return "." if rel in ("", ".") else rel


class _Invalid(Exception):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Invalid(f"the key {key!r} appears twice")
        out[key] = value
    return out


def _string(obj: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"{where}: {key!r} must be a non-empty string")
    return value


def _entry(raw: Any, i: int) -> PinnedSkill:
    where = f"skills[{i}]"
    if not isinstance(raw, dict):
        raise _Invalid(f"{where} must be an object")
    name = _string(raw, "name", where)
    path = _string(raw, "path", where)
    assert name is not None and path is not None
    if path != "." and relpath_problem(path) is not None:
        raise _Invalid(f"{where}: path {path!r} is not a plain relative path ({relpath_problem(path)})")
    files = raw.get("files")
    if not isinstance(files, dict) or not files:
        raise _Invalid(f"{where}: 'files' must be a non-empty object of path -> 'sha256:<hex>'")
    for rel, digest in files.items():
        if relpath_problem(rel) is not None:
            raise _Invalid(f"{where}: file {rel!r} is not a plain relative path")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise _Invalid(f"{where}: the digest of {rel!r} is not 'sha256:' and 64 lowercase hex digits")
    tags = raw.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _Invalid(f"{where}: 'tags' must be a list of strings")
    phase = _string(raw, "phase", where, required=False)
    return PinnedSkill(name=name, path=path, files=dict(files), phase=phase, tags=tuple(tags))


def parse_pack(text: str, directory: Path) -> Pack:
    """Parse pack.json text. Raises ``PackError`` with the reason that refuses the pack."""
    # The decoder recurses once per bracket: text nested past the interpreter's recursion limit
    # would raise RecursionError out of the catalog's build, leaving every skill unserved.
    if not depth_within(text, MAX_DEPTH):
        raise PackError(ProblemReason.PACK_INVALID, f"pack.json nests deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except _Invalid as exc:
        raise PackError(ProblemReason.PACK_INVALID, f"pack.json: {exc}") from None
    except ValueError as exc:
        raise PackError(ProblemReason.PACK_INVALID, f"pack.json is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PackError(ProblemReason.PACK_INVALID, "pack.json must hold a JSON object")
    version = data.get("schemaVersion")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise PackError(
            ProblemReason.PACK_VERSION,
            f"pack.json schemaVersion {version!r} is not one this server reads ({SCHEMA_VERSION})",
        )
    try:
        name = _string(data, "name", "pack.json")
        pack_version = _string(data, "version", "pack.json")
        description = _string(data, "description", "pack.json", required=False)
        skills = data.get("skills")
        if not isinstance(skills, list):
            raise _Invalid("pack.json: 'skills' must be a list")
        entries = tuple(_entry(raw, i) for i, raw in enumerate(skills))
    except _Invalid as exc:
        raise PackError(ProblemReason.PACK_INVALID, str(exc)) from None
    paths = [e.path for e in entries]
    if len(set(paths)) != len(paths):
        raise PackError(ProblemReason.PACK_INVALID, "pack.json lists one skill path twice")
    assert name is not None and pack_version is not None
    return Pack(name=name, version=pack_version, directory=directory, skills=entries, description=description)


class PackError(Exception):
    def __init__(self, reason: ProblemReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def load_pack(directory: Path) -> Pack | Problem:
    """Read ``directory/pack.json``. A refused pack comes back as the ``Problem`` saying why."""
    real = Path(os.path.realpath(directory))
    path = directory / PACK_JSON
    try:
        with open(path, "rb") as handle:
            raw = handle.read(PACK_JSON_MAX_BYTES + 1)
    except OSError as exc:
        return Problem(str(path), ProblemReason.PACK_INVALID, f"pack.json cannot be read: {exc.strerror}")
    if len(raw) > PACK_JSON_MAX_BYTES:
        return Problem(str(path), ProblemReason.PACK_INVALID, f"pack.json is larger than {PACK_JSON_MAX_BYTES} bytes")
    try:
        return parse_pack(raw.decode("utf-8"), real)
    except UnicodeDecodeError:
        return Problem(str(path), ProblemReason.PACK_INVALID, "pack.json is not UTF-8")
    except PackError as exc:
        return Problem(str(path), exc.reason, exc.detail)


def _pinned_files(pack: Pack, skill: Skill) -> list[SkillFile]:
    """The skill's files that pins cover: all of them, except the pack's own pack.json."""
    at_pack_root = skill.directory == pack.directory
    return [f for f in skill.files if not (at_pack_root and f.rel == PACK_JSON)]


def verify_skill(pack: Pack, skill: Skill, digest: DigestFn | None = None) -> list[Problem]:
    """Problems that refuse ``skill`` under ``pack`` (empty when every file matches its pin)."""
    if digest is None:
        memo = DigestMemo()

        def digest(s: Skill, f: SkillFile) -> str:
            return file_digest(memo, s, f)

    entry = pack.pinned_at(skill.directory)
    if entry is None:
        return [
            Problem(
                skill.found_at,
                ProblemReason.DIGEST_MISMATCH,
                f"refused: the skill is inside pack {pack.name!r} but pack.json does not pin it "
                "(run `skill-mcp pack lock` to pin it)",
                Level.ERROR,
                skill.name,
            )
        ]
    actual: dict[str, str | None] = {}
    for f in _pinned_files(pack, skill):
        try:
            actual[f.rel] = digest(skill, f)
        except (OSError, SkillMcpError):  # a file that cannot be hashed cannot match its pin
            actual[f.rel] = None
    changed = sorted(rel for rel in actual.keys() & entry.files.keys() if actual[rel] != entry.files[rel])
    added = sorted(actual.keys() - entry.files.keys())
    removed = sorted(entry.files.keys() - actual.keys())
    if not (changed or added or removed):
        return []
    parts = [
        f"{label}: {', '.join(names[:MAX_LISTED])}" + (" ..." if len(names) > MAX_LISTED else "")
        for label, names in (("changed", changed), ("not pinned", added), ("missing", removed))
        if names
    ]
    return [
        Problem(
            skill.found_at,
            ProblemReason.DIGEST_MISMATCH,
            f"refused: files differ from the pins in pack {pack.name!r} ({'; '.join(parts)})",
            Level.ERROR,
            skill.name,
        )
    ]


def apply_pack(pack: Pack, skill: Skill, digest: DigestFn | None = None) -> tuple[Skill | None, list[Problem]]:
    """Verify ``skill`` against ``pack``: the skill stamped with its pack, phase and tags, or None."""
    problems = verify_skill(pack, skill, digest)
    if problems:
        return None, problems
    entry = pack.pinned_at(skill.directory)
    assert entry is not None
    return replace(skill, pack=pack.name, phase=entry.phase or skill.phase, tags=entry.tags or skill.tags), []


def enclosing_pack(packs: Iterable[Pack], skill_dir: Path) -> Pack | None:
    """The innermost pack whose directory holds ``skill_dir`` (real paths)."""
    best: Pack | None = None
    for pack in packs:
        if is_inside(pack.directory, skill_dir) and (
            best is None or len(pack.directory.parts) > len(best.directory.parts)
        ):
            best = pack
    return best


def apply_packs(
    skills: Sequence[Skill], pack_dirs: Iterable[Path], digest: DigestFn | None = None
) -> tuple[list[Skill], list[Problem]]:
    """The catalog's pack pass: load each pack, verify each skill inside one, report the rest.

    Returns the skills to serve (stamped with pack, phase and tags where pinned) and the
    problems: refused packs (their skills refused with them), digest mismatches, and pins
    that name a skill directory where no skill was found.
    """
    problems: list[Problem] = []
    packs: list[Pack] = []
    refused_dirs: list[tuple[Path, Problem]] = []
    for directory in sorted({Path(os.path.realpath(d)) for d in pack_dirs}):
        loaded = load_pack(directory)
        if isinstance(loaded, Problem):
            problems.append(loaded)
            refused_dirs.append((directory, loaded))
        else:
            packs.append(loaded)
    kept: list[Skill] = []
    for skill in skills:
        pack = enclosing_pack(packs, skill.directory)
        refusal = _refused_by(refused_dirs, skill.directory, pack)
        if refusal is not None:
            problems.append(
                Problem(
                    skill.found_at,
                    refusal.reason,
                    f"refused with its pack ({refusal.path}): {refusal.detail}",
                    Level.ERROR,
                    skill.name,
                )
            )
            continue
        if pack is None:
            kept.append(skill)
            continue
        stamped, found = apply_pack(pack, skill, digest)
        problems.extend(found)
        if stamped is not None:
            kept.append(stamped)
    found_at = {(p.directory, _rel_to(p.directory, s.directory)) for s in skills for p in packs}
    for pack in packs:
        for entry in pack.skills:
            if (pack.directory, entry.path) not in found_at:
                problems.append(
                    Problem(
                        str(pack.directory / entry.path),
                        ProblemReason.DIGEST_MISMATCH,
                        f"pack {pack.name!r} pins a skill {entry.name!r} at {entry.path!r} "
                        "but no skill was found there",
                        Level.WARNING,
                        entry.name,
                    )
                )
    return kept, problems


def _refused_by(refused: list[tuple[Path, Problem]], skill_dir: Path, pack: Pack | None) -> Problem | None:
    """A refused pack governs a skill when it is nearer to the skill than any loaded pack."""
    best: tuple[Path, Problem] | None = None
    for directory, problem in refused:
        if is_inside(directory, skill_dir) and (best is None or len(directory.parts) > len(best[0].parts)):
            best = (directory, problem)
    if best is None:
        return None
    if pack is not None and len(pack.directory.parts) > len(best[0].parts):
        return None
    return best[1]


def render_pack(name: str, version: str, entries: Iterable[PinnedSkill], description: str | None = None) -> str:
    """pack.json text: sorted keys and entries, two-space indent, final newline."""
    skills = []
    for e in sorted(entries, key=lambda e: e.path):
        row: dict[str, Any] = {"name": e.name, "path": e.path, "files": dict(sorted(e.files.items()))}
        if e.phase:
            row["phase"] = e.phase
        if e.tags:
            row["tags"] = list(e.tags)
        skills.append(row)
    doc: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "name": name, "version": version, "skills": skills}
    if description:
        doc["description"] = description
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def posix_rel(base: Path, target: Path) -> str:
    rel = _rel_to(base, target)
    return rel if rel is not None else PurePosixPath(os.path.relpath(target, base)).as_posix()
