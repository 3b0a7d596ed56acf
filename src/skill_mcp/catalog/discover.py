"""Find the skills under the configured roots and build an immutable ``Catalog``.

Layouts under each root: ``<root>/SKILL.md`` (the root is the skill, named by the root
directory), ``<root>/<name>/SKILL.md`` and ``<root>/skills/<name>/SKILL.md``; a directory
holding ``pack.json`` is searched the same way. Nested skills (a SKILL.md below another
skill) are published flat as their own skills.

Naming is a security rule: a skill is served under its directory name (for a symlinked
skill directory, its target's name), so a bundle cannot claim a neighbour's name and with it
the neighbour's grants. Two different directories that arrive at one name are both refused.
A directory reached twice (a link to a skill also listed directly) is one skill. Every
directory a layout reaches is either served or reported; dot-directories (``.git``,
``.github``) are not candidates.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from skill_mcp.catalog.files import SKILL_MD, DigestMemo, file_digest
from skill_mcp.catalog.packs import PACK_JSON, apply_packs
from skill_mcp.catalog.skill import load_skill
from skill_mcp.config import Settings
from skill_mcp.models import Catalog, Problem, Skill
from skill_mcp.paths import is_inside
from skill_mcp.reasons import Level, ProblemReason

CONTAINER_NAMES = frozenset({"skills"})


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _has_skill_md(path: Path) -> bool:
    try:
        return (path / SKILL_MD).exists() or (path / SKILL_MD).is_symlink()
    except OSError:
        return False


def _candidates(container: Path, root_real: Path, problems: list[Problem], packs: list[Path],
                depth: int = 0) -> list[Path]:
    """Directories under ``container`` that a layout says should be skills; collects pack dirs."""
    if (container / PACK_JSON).is_file():
        packs.append(container)
    if _has_skill_md(container):
        return [container]
    found: list[Path] = []
    try:
        children = sorted(os.scandir(container), key=lambda e: e.name)
    except OSError as exc:
        problems.append(Problem(str(container), ProblemReason.UNREADABLE, f"cannot be read: {exc.strerror}"))
        return found
    for entry in children:
        child = container / entry.name
        if entry.name.startswith(".") or not _is_dir(child):
            continue
        if _has_skill_md(child):
            found.append(child)
        elif depth < 3 and (entry.name in CONTAINER_NAMES or (child / PACK_JSON).is_file()):
            found.extend(_candidates(child, root_real, problems, packs, depth + 1))
        else:
            problems.append(Problem(str(child), ProblemReason.NO_SKILL_MD,
                                    "not served: the directory holds no SKILL.md", Level.WARNING))
    return found


def build_catalog(settings: Settings, *, generation: int = 0, memo: DigestMemo | None = None) -> Catalog:
    """Scan every root once. One bad skill costs itself, never the listing.

    Skills inside a pack are checked against its SHA-256 pins (``catalog.packs``); ``memo``
    lets the server reuse those digests later.
    """
    problems: list[Problem] = []
    pack_dirs: list[Path] = []
    queue: list[tuple[Path, Path]] = []  # (found_at, root_real)
    roots_real: list[Path] = []
    for root in settings.roots:
        if not _is_dir(root):
            problems.append(Problem(str(root), ProblemReason.ROOT_MISSING, "the skills root is not a directory"))
            continue
        root_real = Path(os.path.realpath(root))
        roots_real.append(root_real)
        found = _candidates(root, root_real, problems, pack_dirs)
        # Directories listed directly come before links to them, so a skill reached both
        # ways is reported under its own path and the link is simply the same skill.
        found.sort(key=lambda path: path.is_symlink())
        queue.extend((path, root_real) for path in found)

    loaded: dict[Path, Skill] = {}
    seen: set[Path] = set()
    while queue:
        found_at, root_real = queue.pop(0)
        real = Path(os.path.realpath(found_at))
        if not is_inside(root_real, real):
            problems.append(Problem(str(found_at), ProblemReason.SYMLINK_ESCAPE,
                                    f"not served: the link leads out of its root to {real}"))
            continue
        if real in seen:
            continue
        seen.add(real)
        if found_at.name != real.name and found_at != Path(str(root_real)):
            problems.append(Problem(str(found_at), ProblemReason.NAME_MISMATCH,
                                    f"a link to {real.name!r}: served under its target's name {real.name!r}; "
                                    "write grants against that name", Level.WARNING, real.name))
        result = load_skill(real, found_at, root_real)
        problems.extend(result.problems)
        if result.skill is not None:
            loaded[real] = result.skill
        queue.extend((nested, root_real) for nested in result.nested)

    digests = memo or DigestMemo()
    kept, pack_problems = apply_packs(list(loaded.values()), pack_dirs,
                                      digest=lambda skill, entry: file_digest(digests, skill, entry))
    problems.extend(pack_problems)
    by_name: dict[str, list[Skill]] = defaultdict(list)
    for skill in kept:
        by_name[skill.name].append(skill)
    skills: dict[str, Skill] = {}
    for name in sorted(by_name):
        group = by_name[name]
        if len(group) == 1:
            skills[name] = group[0]
            continue
        others = ", ".join(sorted(s.found_at for s in group))
        for skill in group:
            problems.append(Problem(skill.found_at, ProblemReason.DUPLICATE_NAME,
                                    f"refused: {len(group)} directories claim the name {name!r} ({others})",
                                    Level.ERROR, name))
    return Catalog(skills=skills, problems=tuple(problems), roots=tuple(roots_real), generation=generation)
