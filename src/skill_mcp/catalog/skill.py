"""Load one skill directory into a ``Skill`` record, or into the problems that refuse it."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from skill_mcp.catalog.declaration import read_declaration
from skill_mcp.catalog.files import SKILL_MD, Stamp, stamp
from skill_mcp.catalog.frontmatter import (
    FrontmatterError,
    FrontmatterInvalid,
    Split,
    parse_frontmatter_composed,
    split,
)
from skill_mcp.catalog.loaded import Loaded as Loaded  # re-exported: the loader's result
from skill_mcp.catalog.spec import extension_rules, is_valid_name, spec_warnings
from skill_mcp.catalog.walk import MAX_FILES, MAX_TOTAL_BYTES, MAX_WALK_ENTRIES, Walk, walk_skill
from skill_mcp.catalog.yaml11 import Difference, differences_composed
from skill_mcp.limits import READ_CAPS
from skill_mcp.models import Problem, Skill
from skill_mcp.paths import is_inside
from skill_mcp.reasons import ExtensionRule, Level, ProblemReason

SKILL_MD_MAX_BYTES = READ_CAPS.skill_md


class _Stamps:
    """The stamps taken before the walk: the skill directory, then SKILL.md as it was read."""

    def __init__(self) -> None:
        self.taken: list[Stamp] = []
        self.pinned = True


def _read_skill_md(real_dir: Path, stamps: _Stamps) -> bytes:
    path = f"{real_dir}/{SKILL_MD}"
    st = os.lstat(path)
    # Stamped before any check: a refusal (too large, not a regular file) depends on it too.
    stamps.taken.append(stamp(SKILL_MD, st))
    if stat.S_ISLNK(st.st_mode):
        stamps.pinned = False
        # Only a link needs resolving; a plain SKILL.md in a real directory is already real.
        path = os.path.realpath(path)
        if not is_inside(real_dir, Path(path)):
            raise _Refused(ProblemReason.SYMLINK_ESCAPE, "SKILL.md is a link leading out of the skill")
        st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _Refused(ProblemReason.SPECIAL_FILE, "SKILL.md is not a regular file")
    if st.st_size > SKILL_MD_MAX_BYTES:
        # Refused rather than cut: a truncated SKILL.md would be served under the digest of the
        # whole file (skills/list, the manifest), and the cut could drop the steps that matter.
        raise _Refused(
            ProblemReason.SKILL_TOO_LARGE,
            f"SKILL.md is {st.st_size} bytes, over the {SKILL_MD_MAX_BYTES}-byte limit for instructions; "
            "move long material into files beside it (references/) and link to them",
        )
    # A bare descriptor, not a file object: no buffer, no isatty or seek, one read of the size
    # the stat gives (and one more that meets the end), up to one byte past the limit.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        # Stamped from the descriptor before the read: a write after this stat changes the
        # ctime, so a cached result is never taken for the newer bytes.
        opened = os.fstat(fd)
        stamps.taken.append(stamp(SKILL_MD, opened))
        return _read_up_to(fd, SKILL_MD_MAX_BYTES + 1, opened.st_size + 1)
    finally:
        os.close(fd)


def _read_up_to(fd: int, limit: int, first: int) -> bytes:
    """Up to ``limit`` bytes of ``fd``, reading ``first`` bytes at first: what a buffered
    ``read(limit)`` returns, the whole file or ``limit`` bytes, whichever is shorter."""
    chunk = os.read(fd, min(first, limit))
    if not chunk or len(chunk) == limit:
        return chunk
    chunks, total = [chunk], len(chunk)
    while total < limit:
        chunk = os.read(fd, limit - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class _Refused(Exception):
    def __init__(self, reason: ProblemReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def load_skill(real_dir: Path, found_at: Path, root_real: Path) -> Loaded:
    """Read ``real_dir`` (a resolved directory holding SKILL.md) as the skill named by its basename."""
    name = real_dir.name
    shown = str(found_at)
    stamps = _Stamps()
    try:
        stamps.taken.append(stamp("", os.stat(real_dir)))
        return _load(real_dir, found_at, root_real, name, stamps)
    except _Refused as exc:
        return Loaded(
            None, (Problem(shown, exc.reason, exc.detail, Level.ERROR, name),), (), tuple(stamps.taken), stamps.pinned
        )
    except OSError as exc:
        return Loaded(
            None, (Problem(shown, ProblemReason.UNREADABLE, f"cannot be read: {exc.strerror}", Level.ERROR, name),)
        )


def _load(real_dir: Path, found_at: Path, root_real: Path, name: str, stamps: _Stamps) -> Loaded:
    shown = str(found_at)
    problems: list[Problem] = []

    def note(reason: ProblemReason, detail: str, level: Level = Level.WARNING, path: str = shown) -> None:
        problems.append(Problem(path, reason, detail, level, name))

    if not is_valid_name(name):
        raise _Refused(
            ProblemReason.INVALID_NAME,
            f"the directory name {name!r} is not a skill name (1-64 lowercase letters, digits, hyphens)",
        )
    raw = _read_skill_md(real_dir, stamps)
    try:
        parts = split(raw)
        frontmatter, host_chunk, composed = parse_frontmatter_composed(parts)
    except FrontmatterInvalid as exc:
        raise _Refused(ProblemReason.FRONTMATTER_INVALID, str(exc)) from None
    except FrontmatterError as exc:
        raise _Refused(ProblemReason.FRONTMATTER_PARSE, str(exc)) from None
    description = frontmatter.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _Refused(ProblemReason.FRONTMATTER_INVALID, "the frontmatter needs a non-empty description string")
    for warning in spec_warnings(frontmatter):
        note(ProblemReason.SPEC_WARNING, warning)

    fm_name = frontmatter.get("name")
    if isinstance(fm_name, str) and fm_name != name:
        note(
            ProblemReason.NAME_MISMATCH,
            f"served as {name!r} (its directory name); the frontmatter name {fm_name!r} is ignored",
        )

    declared = read_declaration(host_chunk, parts.first_line)
    scripts = frozenset(row.script for row in declared.declaration.run) if declared.declaration else frozenset()
    walk = walk_skill(real_dir, name, scripts)
    problems.extend(walk.problems)
    # The walk stamps the directory and SKILL.md again; the earlier stamps stay too, so a
    # change between the read and the walk fails one of the two.
    stamps.taken.extend(walk.stamps)
    stamps.pinned = stamps.pinned and walk.stampable
    if walk.left_out or walk.stopped:
        note(ProblemReason.FILES_OVER_LIMIT, _left_out_detail(walk))

    for reason, level, detail in declared.findings:
        note(reason, detail, level)
    if host_chunk.present and declared.parsed:
        # SEP-2640 publishes the frontmatter verbatim: every field the author wrote. (A block
        # that does not parse is already reported as declaration-invalid and left out.)
        frontmatter = {**frontmatter, "mcp-host": declared.raw}
    served = {f.rel for f in walk.files}
    missing: list[str] = []
    if declared.declaration is not None:
        for row in declared.declaration.run:
            if row.script not in served:
                missing.append(row.script)
                note(
                    ProblemReason.DECLARED_SCRIPT_MISSING,
                    f"declared script {row.script} is not a servable file of this skill",
                    Level.ERROR,
                    str(found_at / row.script),
                )
    rules = _extension_rules(frontmatter, declared.parsed or not host_chunk.present, walk, name)
    # The tree read as ``frontmatter`` only while no mcp-host entry was added to it.
    diffs = _yaml11(frontmatter, parts, None if host_chunk.present else composed, rules)
    for rule, detail in rules:
        problems.append(
            Problem(
                shown,
                ProblemReason.EXTENSION_EXCLUDED,
                f"{detail}; left out of the Skills extension (skills/list, skills/get, "
                "resources/list) and still served by the tools",
                Level.ERROR,
                name,
                str(rule),
            )
        )
    for diff in diffs:
        note(
            ProblemReason.YAML_AMBIGUOUS,
            f"frontmatter field {diff.field}: YAML 1.2 reads {diff.yaml12!r}, YAML 1.1 (PyYAML's default "
            f"loader, which many hosts use) reads {diff.yaml11!r}, and a host refuses a skill whose "
            f"frontmatter reads otherwise than its entry; {diff.advice()}",
        )
    skill = Skill(
        name=name,
        directory=real_dir,
        found_at=shown,
        root=root_real,
        frontmatter=frontmatter,
        description=description,
        files=walk.files,
        body_offset=parts.body_offset,
        declaration=declared.declaration,
        missing_scripts=tuple(missing),
        skills_list_excluded=rules[0][0] if rules else None,
        tags=_tags(frontmatter),
    )
    return Loaded(skill, tuple(problems), walk.nested, tuple(stamps.taken), stamps.pinned)


def _extension_rules(
    frontmatter: dict[str, Any], host_parsed: bool, walk: Walk, name: str
) -> list[tuple[ExtensionRule, str]]:
    """Every rule that keeps this skill out of the Skills extension, in the order they are checked."""
    rules = extension_rules(frontmatter, name)
    if not host_parsed:
        rules.append(
            (
                ExtensionRule.FRONTMATTER_DIVERGES,
                "its mcp-host block is left out of the entry (it does not parse, or holds what JSON cannot "
                "carry), so the entry is not the frontmatter a host reads from the file",
            )
        )
    if walk.left_out or walk.stopped:
        # The manifest must be complete: a skill over a limit is never published with a cut one.
        found = len(walk.files) + walk.left_out
        if walk.stopped or found > MAX_FILES:
            rules.append(
                (
                    ExtensionRule.TOO_MANY_FILES,
                    f"it has {'more than ' if walk.stopped else ''}{found} files; an entry lists every "
                    f"file and a host need accept at most {MAX_FILES}",
                )
            )
        else:
            total = sum(f.size for f in walk.files) + walk.left_out_bytes
            rules.append(
                (
                    ExtensionRule.TOO_LARGE,
                    f"its files total {total} bytes; a host need accept at most {MAX_TOTAL_BYTES}",
                )
            )
    return rules


def _yaml11(
    frontmatter: dict[str, Any], parts: Split, composed: Any, rules: list[tuple[ExtensionRule, str]]
) -> list[Difference]:
    """The fields a YAML 1.1 host reads otherwise; recorded as a rule too, so the skill stays out."""
    if any(rule is ExtensionRule.FRONTMATTER_DIVERGES for rule, _ in rules):
        return []
    diffs = differences_composed(parts.frontmatter, frontmatter, composed)
    if diffs:
        rules.append(
            (
                ExtensionRule.YAML_AMBIGUOUS,
                f"a host parsing with YAML 1.1 reads {', '.join(d.field for d in diffs)} otherwise than "
                "the entry (see yaml-version-ambiguous)",
            )
        )
    return diffs


def _left_out_detail(walk: Walk) -> str:
    """What the limits cost this skill, in one sentence a person can act on."""
    count = f"at least {walk.left_out}" if walk.stopped else str(walk.left_out)
    named = ", ".join(walk.left_out_first) + (" ..." if walk.left_out > len(walk.left_out_first) else "")
    stop = f"; the walk stopped after {MAX_WALK_ENTRIES} entries" if walk.stopped else ""
    return (
        f"{count} files ({walk.left_out_bytes} bytes) not served: a skill serves at most {MAX_FILES} files "
        f"and {MAX_TOTAL_BYTES} bytes (SKILL.md and the files nearest the top first){stop}"
        + (f"; left out: {named}" if named else "")
    )


def _tags(frontmatter: dict[str, object]) -> tuple[str, ...]:
    metadata = frontmatter.get("metadata")
    if isinstance(metadata, dict):
        tags = metadata.get("tags")
        if isinstance(tags, str):
            return tuple(t for t in tags.replace(",", " ").split() if t)
    return ()
