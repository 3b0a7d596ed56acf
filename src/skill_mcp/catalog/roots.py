"""What a person must hear at start about the roots, decided without loading a skill.

``probe_roots`` names each root that is not a directory (``root-missing``) and each that
discovery finds nothing to serve under (``root-empty``), with a hint when it saw where skills
are (``where_skills_sit``): a SKILL.md one or two levels below (``ROOT/category/skill/SKILL.md``:
the root is one level too high), or a ``skill.md`` spelt in another case. Every command says
these once at start, and the server puts them in its log and its ``instructions``.

Light on purpose: a server's start-up runs it before the handshake, so this module imports
only the standard library and the reason enum; discovery's walk (``catalog.discover``) is
imported only for a root that has no candidate at its top, which is a root that is wrong.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skill_mcp.reasons import Level, ProblemReason

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.config import Settings


def real_root(root: str) -> str | None:
    """The real path of a skills root, or None when it is not a directory (discovery reports
    that one as ``root-missing``). Discovery and the scan helper's verdicts (which must name
    the same cache file) both take a root's real path here."""
    try:
        if not os.path.isdir(root):
            return None
    except OSError:
        return None
    return os.path.realpath(root)


# catalog.files.SKILL_MD, catalog.packs.PACK_JSON and discovery's container, spelt here so that this module imports
# neither (tests/catalog/test_root_notes.py holds them equal).
SKILL_MD = "SKILL.md"
PACK_JSON = "pack.json"
CONTAINER = "skills"  # catalog.layouts.CONTAINER_NAMES' one name
ROOT_EMPTY_HINT = (
    "a skill is a directory holding SKILL.md (ROOT, ROOT/<name> or ROOT/skills/<name>); "
    "hidden directories are not searched, so name them as roots"
)
# The detail of a directory discovery reached that holds no SKILL.md; a hint, when one was
# seen, follows after "; " (catalog.discover).
NO_SKILL_MD_DETAIL = "not served: the directory holds no SKILL.md"
# How much of a directory that serves nothing is looked through for a hint: bounded, so a large
# tree that is not a skill collection costs little.
HINT_SCAN_ENTRIES = 256


@dataclass(frozen=True, slots=True)
class RootNote:
    """One thing to say about one root (the fields of a ``models.Problem``)."""

    path: str
    reason: ProblemReason
    detail: str
    level: Level


def _join(directory: str, name: str) -> str:
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


def _has(directory: str, name: str) -> bool:
    # lexists: a SKILL.md that is a link (even a dangling one) makes a skill, as in discovery.
    return os.path.lexists(_join(directory, name))


def visible_dirs(directory: str, limit: int = HINT_SCAN_ENTRIES) -> list[str]:
    """Up to ``limit`` directories in ``directory`` that are not hidden, sorted."""
    out: list[str] = []
    try:
        with os.scandir(directory) as it:
            for entry in it:
                if len(out) >= limit:
                    break
                try:
                    if not entry.name.startswith(".") and entry.is_dir():
                        out.append(_join(directory, entry.name))
                except OSError:
                    continue
    except OSError:
        return []
    return sorted(out)


def _other_case(directory: str) -> str | None:
    """A file in ``directory`` named SKILL.md in another case (``skill.md``), if any."""
    try:
        with os.scandir(directory) as it:
            for entry in it:
                if entry.name != SKILL_MD and entry.name.lower() == SKILL_MD.lower():
                    return entry.name
    except OSError:
        return None
    return None


def _case_hint(directory: str, name: str) -> str:
    return f"found {_join(directory, name)}: the file must be named {SKILL_MD} (upper case)"


def where_skills_sit(directory: str) -> str | None:
    """Why ``directory`` (holding no SKILL.md) may still hold skills, as a hint; None when nothing was seen.

    A ``skill.md`` in another case is named (the name is case-sensitive, as clients and the
    Agent Skills spec read it); else a SKILL.md one or two levels below, with the directory to
    name as a root instead. At most ``HINT_SCAN_ENTRIES`` directories are looked at.
    """
    other = _other_case(directory)
    if other is not None:
        return _case_hint(directory, other)
    budget = HINT_SCAN_ENTRIES
    for child in visible_dirs(directory, budget):
        grandchildren = visible_dirs(child, budget)
        budget -= 1 + len(grandchildren)
        for level, below in ((1, [child]), (2, grandchildren)):
            for path in below:
                if _has(path, SKILL_MD):
                    parent = os.path.dirname(path)
                    depth = "one level" if level == 1 else "two levels"
                    return (
                        f"{SKILL_MD} found {depth} below it ({_join(path, SKILL_MD)}): "
                        f"name {parent} as a root (--skills-dir {parent})"
                    )
                other = _other_case(path)
                if other is not None:
                    return _case_hint(path, other)
        if budget <= 0:
            break
    return None


def _serves_at_top(path: str) -> bool:
    """A SKILL.md or a pack.json in the root or one of its children, or a SKILL.md in a child of
    its ``skills/`` container (the layouts of ``catalog.discover``): discovery will serve it."""
    if _has(path, SKILL_MD) or _has(path, PACK_JSON):
        return True
    for child in visible_dirs(path):
        if _has(child, SKILL_MD) or _has(child, PACK_JSON):
            return True
        if os.path.basename(child) == CONTAINER and any(_has(c, SKILL_MD) for c in visible_dirs(child)):
            return True
    return False


def probe_roots(settings: Settings) -> tuple[RootNote, ...]:
    """The notes for ``settings.roots``: the usual root costs one directory listing; a root with
    no candidate at its top pays for discovery's walk (bounded as the catalog's is)."""
    notes: list[RootNote] = []
    for root in settings.roots:
        path = str(root)
        if not os.path.isdir(path):
            notes.append(
                RootNote(
                    path,
                    ProblemReason.ROOT_MISSING,
                    "the skills root is not a directory; nothing is served from it",
                    Level.ERROR,
                )
            )
            continue
        if _serves_at_top(path):
            continue
        from skill_mcp.catalog.layouts import walk_candidates

        candidates, problems = walk_candidates(path)
        if candidates:
            continue
        hints = [p.detail.partition("; ")[2] for p in problems if p.reason == ProblemReason.NO_SKILL_MD]
        hints = [h for h in hints if h]
        hint = where_skills_sit(path) or (hints[0] if hints else ROOT_EMPTY_HINT)
        more = f" (and {len(hints) - 1} more directories like it)" if len(hints) > 1 else ""
        notes.append(
            RootNote(path, ProblemReason.ROOT_EMPTY, f"no skill found under this root: {hint}{more}", Level.WARNING)
        )
    return tuple(notes)
