"""Where skills sit: the layouts under each root, and the walk that finds the candidates.

Layouts under each root: ``<root>/SKILL.md`` (the root is the skill, named by the root
directory), ``<root>/<name>/SKILL.md`` and ``<root>/skills/<name>/SKILL.md``; a directory
holding ``pack.json`` is searched the same way, wherever it is: a directory that is neither a
skill nor a pack is searched for packs below it (``<root>/<group>/<pack>/pack.json``, down to
``MAX_DEPTH`` levels under the root), so anything with a pack.json is discovered and served.
Every directory a layout reaches is either a candidate or reported (``no-skill-md``);
dot-directories (``.git``, ``.github``) are not candidates. ``find`` walks every root once and
says what to load (``Found``); ``catalog.discover`` loads it. The walk keeps what it learnt on
the way, so the load need not ask again: each candidate's real path where no link was crossed,
and the ``lstat`` of its SKILL.md that made it a candidate.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter

from skill_mcp.catalog.files import SKILL_MD
from skill_mcp.catalog.packs import PACK_JSON
from skill_mcp.catalog.roots import NO_SKILL_MD_DETAIL, ROOT_EMPTY_HINT, real_root, where_skills_sit
from skill_mcp.config import Settings
from skill_mcp.models import Problem
from skill_mcp.reasons import Level, ProblemReason

CONTAINER_NAMES = frozenset({"skills"})
# Directories the search for packs below a grouping directory never enters: they hold copies of
# packs that live elsewhere (a wheel build's build/lib, an installed package, a dependency), and
# serving a copy beside its original would refuse both as duplicate names.
BUILD_OUTPUTS = frozenset({"build", "dist", "node_modules", "site-packages", "__pycache__"})
# How far below a root a layout reaches: ``skills/`` containers and packs nest at most this
# deep, and a directory that is neither a skill nor a pack is searched for packs down to it.
MAX_DEPTH = 4
# Directories one root's search for packs may open. A root pointed at a source checkout (the
# ``skillmcp`` configuration's ``--packs-root .``) holds many directories that are neither skills nor packs; the
# budget bounds the time a build pays for them.
PACK_SEARCH_BUDGET = 4096


_SLASH_SKILL_MD = f"/{SKILL_MD}"
_entry_name = attrgetter("name")


def _join(directory: str, name: str) -> str:
    """``directory/name`` spelled as ``Path(directory) / name`` would print it."""
    if directory == ".":
        return name
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


def inside(base: str, candidate: str) -> bool:
    """``paths.is_inside`` for resolved paths already held as text."""
    return candidate == base or candidate.startswith(base if base.endswith("/") else base + "/")


def _has_skill_md(path: str) -> bool:
    # lexists: a SKILL.md that is a link (even a dangling one) makes a skill, reported later.
    return os.path.lexists(f"{path}/{SKILL_MD}")


def _has_pack(path: str) -> bool:
    return os.path.isfile(f"{path}/{PACK_JSON}")


def _no_skill_md(directory: str) -> Problem:
    hint = where_skills_sit(directory)
    detail = NO_SKILL_MD_DETAIL + (f"; {hint}" if hint else "")
    return Problem(directory, ProblemReason.NO_SKILL_MD, detail, Level.WARNING)


def _root_empty(root: str) -> Problem:
    hint = where_skills_sit(root) or ROOT_EMPTY_HINT
    return Problem(root, ProblemReason.ROOT_EMPTY, f"no skill found under this root: {hint}", Level.WARNING)


class _Walk:
    """One root's discovery: candidates, pack directories and problems, with a search budget."""

    def __init__(self, problems: list[Problem], packs: list[str]) -> None:
        self.problems = problems
        self.packs = packs
        self.budget = PACK_SEARCH_BUDGET
        # Real paths known without ``realpath``: a directory entry that is not a link, inside a
        # directory whose real path is known, is that path plus its name.
        self.reals: dict[str, str] = {}
        # What the ``lstat`` of each candidate's SKILL.md saw (inode, size, mtime, ctime), taken to
        # decide it is a candidate: the cache checks that stamp with it rather than with a second
        # ``lstat`` (``catalog.cache``). Four numbers, not the stat result: a warm build holds
        # one per skill until its entry is checked.
        self.skill_md: dict[str, tuple[int, int, int, int]] = {}

    def has_skill_md(self, path: str) -> bool:
        """``_has_skill_md``, keeping what the ``lstat`` it took saw."""
        try:
            st = os.lstat(f"{path}/{SKILL_MD}")
        except OSError:
            return False
        self.skill_md[path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return True

    def children(self, directory: str) -> list[os.DirEntry[str]] | None:
        try:
            with os.scandir(directory) as it:
                return sorted((e for e in it if not e.name.startswith(".")), key=_entry_name)
        except OSError as exc:
            self.problems.append(Problem(directory, ProblemReason.UNREADABLE, f"cannot be read: {exc.strerror}"))
            return None

    def candidates(self, container: str, depth: int = 0) -> list[str]:
        """Directories under ``container`` that a layout says should be skills."""
        if _has_pack(container):
            self.packs.append(container)
        container_real = self.reals.get(container) or os.path.realpath(container)
        self.reals[container] = container_real
        if self.has_skill_md(container):
            return [container]
        found: list[str] = []
        # ``_join(container, name)`` and ``_join(container_real, name)``, their heads made once;
        # and ``has_skill_md`` inline: one pass per entry of a root that holds thousands.
        head, head_real = _join(container, ""), _join(container_real, "")
        reals, skill_md, lstat = self.reals, self.skill_md, os.lstat
        for entry in self.children(container) or ():
            name = entry.name
            child = head + name
            try:
                if not entry.is_dir():
                    continue
                if not entry.is_symlink():
                    reals[child] = head_real + name
            except OSError:
                continue
            try:
                st = lstat(child + _SLASH_SKILL_MD)
            except OSError:
                st = None
            if st is not None:
                skill_md[child] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                found.append(child)
            elif depth < MAX_DEPTH - 1 and (entry.name in CONTAINER_NAMES or _has_pack(child)):
                found.extend(self.candidates(child, depth + 1))
            else:
                packs = [] if entry.name in BUILD_OUTPUTS else self.packs_below(child, depth + 1)
                if packs:
                    for pack in packs:
                        found.extend(self.candidates(pack, pack.count("/") - child.count("/") + depth + 1))
                else:
                    self.problems.append(_no_skill_md(child))
        return found

    def packs_below(self, directory: str, depth: int) -> list[str]:
        """Pack directories under ``directory`` (a directory that is neither a skill nor a pack),
        not entering skills or packs, down to ``MAX_DEPTH`` below the root."""
        if depth >= MAX_DEPTH or self.budget <= 0:
            return []
        self.budget -= 1
        out: list[str] = []
        try:
            with os.scandir(directory) as it:
                entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
        except OSError:
            return out
        for entry in entries:
            try:
                if not entry.is_dir():
                    continue
            except OSError:
                continue
            if entry.name in BUILD_OUTPUTS:
                continue
            path = _join(directory, entry.name)
            if _has_pack(path):
                out.append(path)
            elif not _has_skill_md(path):
                out.extend(self.packs_below(path, depth + 1))
        return out


def walk_candidates(root: str) -> tuple[list[str], list[Problem]]:
    """One root's candidates and the problems its walk reported (``catalog.roots`` asks this of
    a root with nothing at its top)."""
    problems: list[Problem] = []
    return _Walk(problems, []).candidates(root), problems


@dataclass(slots=True)
class Found:
    """Discovery's answer for all roots: what to load, and what it learnt on the way."""

    problems: list[Problem] = field(default_factory=list)
    pack_dirs: list[str] = field(default_factory=list)
    queue: deque[tuple[str, str]] = field(default_factory=deque)  # (found_at, root_real)
    roots_real: list[str] = field(default_factory=list)
    reals: dict[str, str] = field(default_factory=dict)
    skill_md: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # candidate -> its SKILL.md seen


def find(settings: Settings) -> Found:
    found = Found()
    for root in settings.roots:
        root_real = real_root(str(root))
        if root_real is None:
            found.problems.append(Problem(str(root), ProblemReason.ROOT_MISSING, "the skills root is not a directory"))
            continue
        found.roots_real.append(root_real)
        walk = _Walk(found.problems, found.pack_dirs)
        said = len(found.problems)
        candidates = walk.candidates(str(root))
        if not candidates and len(found.problems) == said:
            # A collection kept in hidden folders, or a root one level too high, would otherwise
            # look exactly like an empty directory to a client reading the problems. A root whose
            # walk reported something (a directory without SKILL.md, say) has explained itself.
            found.problems.append(_root_empty(str(root)))
        found.reals.update(walk.reals)
        found.skill_md.update(walk.skill_md)
        # Directories listed directly come before links to them, so a skill reached both
        # ways is reported under its own path and the link is simply the same skill. The walk
        # knows the real path of every candidate that is not a link (no lstat needed here).
        # (A root without links, the common case, is already in that order.)
        if not all(map(walk.reals.__contains__, candidates)):
            candidates.sort(key=lambda path: path not in walk.reals)
        found.queue.extend(zip(candidates, repeat(root_real)))
    return found
