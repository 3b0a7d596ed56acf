"""The skill walk as it was before its per-entry costs were cut: the reference the differential
test holds ``catalog.walk.walk_skill`` to (same files, problems, nested skills, stamps, limits)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from skill_mcp.catalog.files import SKILL_MD, Stamp, stamp
from skill_mcp.catalog.walk import (
    BUILD_OUTPUT_DIRS,
    MAX_FILES,
    MAX_LEFT_OUT_NAMED,
    MAX_TOTAL_BYTES,
    MAX_WALK_ENTRIES,
    Walk,
)
from skill_mcp.models import Problem, SkillFile
from skill_mcp.paths import MAX_PATH_CHARS, relpath_problem
from skill_mcp.reasons import Level, ProblemReason


def _below(base: str, candidate: str) -> bool:
    return candidate == base or candidate.startswith(base if base.endswith("/") else base + "/")


class _Walker:
    """One walk of one skill directory (files, then subdirectories, each in name order).

    The limits decide what is served, never whether the skill is (``select``): SKILL.md is
    always kept, then the declared scripts, then the other files nearest the top first, while
    the skill stays within ``MAX_FILES`` files and ``MAX_TOTAL_BYTES`` bytes; the rest are left
    out (counted, reported once). So a large ``assets/`` tree costs its own files, not the
    instructions or the scripts. The walk stops looking after ``MAX_WALK_ENTRIES`` entries,
    which bounds the time and memory a huge tree costs.
    """

    def __init__(self, directory: Path, skill_name: str) -> None:
        self.root = str(directory)
        self.skill_name = skill_name
        self.found: list[SkillFile] = []
        self.problems: list[Problem] = []
        self.nested: list[Path] = []
        self.visited: set[tuple[int, int]] = set()
        self.stamps: list[Stamp] = []
        self.unpinned = False
        self.seen = 0
        self.left_out = 0
        self.left_out_bytes = 0
        self.left_out_first: list[str] = []

    def report(self, path: str, reason: ProblemReason, detail: str) -> None:
        self.problems.append(Problem(path, reason, detail, Level.WARNING, self.skill_name))

    def target(self, entry: os.DirEntry[str], shown: str) -> tuple[str, os.stat_result] | None:
        """The real path and stat of one entry, or None (reported) when it is not servable."""
        if not entry.is_symlink():
            # Not a link inside a real directory: its real path is the directory's plus its
            # name, so the resolution and the containment check below have nothing to do.
            try:
                return entry.path, entry.stat(follow_symlinks=False)
            except OSError:
                self.report(shown, ProblemReason.SYMLINK_ESCAPE, "not served: a link whose target does not exist")
                return None
        self.unpinned = True
        try:
            target = os.path.realpath(entry.path)
            tst = os.stat(target)
        except OSError:
            self.report(shown, ProblemReason.SYMLINK_ESCAPE, "not served: a link whose target does not exist")
            return None
        if not _below(self.root, target):
            self.report(shown, ProblemReason.SYMLINK_ESCAPE, "not served: the link leads out of the skill")
            return None
        return target, tst

    def add_file(self, rel: str, tst: os.stat_result) -> None:
        rel = sys.intern(rel)  # rels repeat across skills
        self.found.append(SkillFile(rel, tst.st_size, tst.st_mtime_ns, tst.st_ino))
        self.stamps.append(stamp(rel, tst))

    def select(self, priority: frozenset[str]) -> list[SkillFile]:
        """The files served: SKILL.md, then ``priority`` (declared scripts), then the rest
        nearest the top first, while the limits hold; the others are counted as left out."""

        def rank(f: SkillFile) -> tuple[int, int, str]:
            first = 0 if f.rel == SKILL_MD else 1 if f.rel in priority else 2
            return first, f.rel.count("/"), f.rel

        kept: list[SkillFile] = []
        total = 0
        for f in sorted(self.found, key=rank):
            if f.rel == SKILL_MD or (len(kept) < MAX_FILES and total + f.size <= MAX_TOTAL_BYTES):
                kept.append(f)
                total += f.size
                continue
            self.left_out += 1
            self.left_out_bytes += f.size
            if len(self.left_out_first) < MAX_LEFT_OUT_NAMED:
                self.left_out_first.append(f.rel)
        return kept

    def entries(self, real_dir: str, shown: str) -> tuple[os.stat_result, list[os.DirEntry[str]]] | None:
        try:
            st = os.stat(real_dir)
            with os.scandir(real_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self.report(shown, ProblemReason.UNREADABLE, f"the directory cannot be read: {exc.strerror}")
            self.unpinned = True  # nothing stamped says when it becomes readable
            return None
        self.visited.add((st.st_dev, st.st_ino))
        return st, entries

    def visit(self, real_dir: str, rel_prefix: str, shown: str) -> bool:
        """Walk one directory; False once the entry budget is spent (the walk stops)."""
        listed = self.entries(real_dir, shown)
        if listed is None:
            return True
        st, entries = listed
        self.stamps.append(stamp(rel_prefix[:-1], st))
        if rel_prefix and any(e.name == SKILL_MD for e in entries):
            self.nested.append(Path(shown))
        subdirs: list[tuple[str, str, str]] = []
        for entry in entries:
            self.seen += 1
            if self.seen > MAX_WALK_ENTRIES:
                return False
            name = os.fsdecode(entry.name)
            if name in BUILD_OUTPUT_DIRS and entry.is_dir(follow_symlinks=False):
                continue
            rel = f"{rel_prefix}{name}"
            # The prefix passed this check when its directory was entered, and every rule but
            # the total length is per character or per segment: checking the new segment is
            # checking the path (the full path is checked when it is long, for the message).
            problem = relpath_problem(name) if len(rel) <= MAX_PATH_CHARS else relpath_problem(rel)
            if problem is not None:
                self.report(f"{shown}/{name}", ProblemReason.UNADDRESSABLE_FILENAME, f"not served: {problem}")
                continue
            found = self.target(entry, f"{shown}/{name}")
            if found is None:
                continue
            target, tst = found
            if stat.S_ISDIR(tst.st_mode):
                if (tst.st_dev, tst.st_ino) in self.visited:
                    self.report(
                        f"{shown}/{name}", ProblemReason.SYMLINK_LOOP, "not descended: the directory was already walked"
                    )
                else:
                    self.visited.add((tst.st_dev, tst.st_ino))
                    subdirs.append((target, f"{rel}/", f"{shown}/{name}"))
            elif stat.S_ISREG(tst.st_mode):
                self.add_file(rel, tst)
            else:
                self.report(f"{shown}/{name}", ProblemReason.SPECIAL_FILE, "not served: not a regular file")
        return all(self.visit(*sub) for sub in subdirs)


def walk_skill(directory: Path, skill_name: str, priority: frozenset[str] = frozenset()) -> Walk:
    """List the servable files of the skill whose real directory is ``directory``; files in
    ``priority`` (declared scripts) are kept before others when the limits bite."""
    walker = _Walker(directory, skill_name)
    complete = walker.visit(walker.root, "", walker.root)
    files = sorted(walker.select(priority), key=lambda f: f.rel)
    return Walk(
        tuple(files),
        tuple(walker.problems),
        tuple(walker.nested),
        walker.left_out,
        walker.left_out_bytes,
        tuple(walker.left_out_first),
        not complete,
        tuple(walker.stamps),
        complete and not walker.unpinned and walker.left_out == 0,
    )
