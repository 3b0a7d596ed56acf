"""The walk that lists a skill's files, and reports every entry it does not serve.

The walk lists each regular file under the skill directory that a read tool can address.
Everything else is reported, never dropped in silence: a symlink leading out of the skill
(``symlink-escape``), a name the read tools cannot address (``unaddressable-filename``), a
FIFO, socket or device (``special-file``), a directory link looping back on the walk
(``symlink-loop``). The first ``MAX_REPORTED`` of each reason are named, the rest counted.
The walk keeps a stack rather than recursing, and stops after ``MAX_WALK_ENTRIES`` entries,
so a huge or deep tree costs bounded time. Every read of the files it lists is
``catalog.files``'.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from skill_mcp.catalog.files import SKILL_MD, Stamp, stamp
from skill_mcp.limits import READ_CAPS
from skill_mcp.models import Problem, SkillFile
from skill_mcp.paths import MAX_PATH_CHARS, below, relpath_problem
from skill_mcp.reasons import Level, ProblemReason

MAX_FILES = 512
# Directories an interpreter writes next to the code it runs (pip byte-compiles an installed
# pack's scripts into them). They are build output, not the author's content: never listed,
# never served, never pinned - the one documented exception to "reported, never silent".
BUILD_OUTPUT_DIRS = frozenset({"__pycache__"})
MAX_TOTAL_BYTES = READ_CAPS.skill_total
# Entries (files, directories, anything) one walk looks at before it stops: a skill holding a
# whole node_modules costs bounded time. Well above MAX_FILES, so a skill whose extra files
# are left out is still walked to the end in any ordinary case.
MAX_WALK_ENTRIES = 16 * MAX_FILES
MAX_LEFT_OUT_NAMED = 5
# Entries of one skill not served for one reason (a name the tools cannot address, a link out
# of the skill, a special file, a loop, an unreadable directory) named one by one, before the
# rest are counted in one problem: a skill of 8,000 such names made 8,000 problems, held in
# memory, written to the catalog cache (1 MB a skill) and counted in every listing.
MAX_REPORTED = 20


@dataclass(frozen=True, slots=True)
class Walk:
    files: tuple[SkillFile, ...]
    problems: tuple[Problem, ...]
    nested: tuple[Path, ...]  # subdirectories (as walked) that hold their own SKILL.md
    # Files left out by the limits: how many, their bytes, the first few paths, and whether the
    # walk stopped before seeing every entry (then ``left_out`` is a lower bound).
    left_out: int = 0
    left_out_bytes: int = 0
    left_out_first: tuple[str, ...] = ()
    stopped: bool = False
    stamps: tuple[Stamp, ...] = ()
    # False when the result also depends on something no stamp pins: a symbolic link (its
    # target can change without any stamp changing), an unreadable directory, or files left
    # out (which ones fit depends on their sizes).
    stampable: bool = True


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
        self.reported: dict[ProblemReason, int] = {}

    def report(self, path: str, reason: ProblemReason, detail: str) -> None:
        """One entry not served, and why: named while fewer than ``MAX_REPORTED`` of its reason
        were, counted after that (``summary``)."""
        count = self.reported[reason] = self.reported.get(reason, 0) + 1
        if count <= MAX_REPORTED:
            self.problems.append(Problem(path, reason, detail, Level.WARNING, self.skill_name))

    def summary(self) -> None:
        """One problem more per reason reported past ``MAX_REPORTED``, counting the rest."""
        for reason, count in self.reported.items():
            if count > MAX_REPORTED:
                more = count - MAX_REPORTED
                self.problems.append(
                    Problem(
                        self.root,
                        reason,
                        f"and {more} more entries not served for the same reason (the first {MAX_REPORTED} "
                        "are named above)",
                        Level.WARNING,
                        self.skill_name,
                    )
                )

    def link_target(self, entry: os.DirEntry[str], shown: str) -> tuple[str, os.stat_result] | None:
        """The real path and stat of an entry that is a link, or None (reported) when it is not servable."""
        self.unpinned = True
        try:
            target = os.path.realpath(entry.path)
            tst = os.stat(target)
        except OSError:
            self.report(shown, ProblemReason.SYMLINK_ESCAPE, "not served: a link whose target does not exist")
            return None
        if not below(self.root, target):
            self.report(shown, ProblemReason.SYMLINK_ESCAPE, "not served: the link leads out of the skill")
            return None
        return target, tst

    def select(self, priority: frozenset[str]) -> list[SkillFile]:
        """The files served: SKILL.md, then ``priority`` (declared scripts), then the rest
        nearest the top first, while the limits hold; the others are counted as left out."""

        def rank(f: SkillFile) -> tuple[int, int, str]:
            first = 0 if f.rel == SKILL_MD else 1 if f.rel in priority else 2
            return first, f.rel.count("/"), f.rel

        if len(self.found) <= MAX_FILES and sum(f.size for f in self.found) <= MAX_TOTAL_BYTES:
            return self.found  # every file fits: the ranking below would keep them all
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

    def entries(
        self, real_dir: str, shown: str, st: os.stat_result | None
    ) -> tuple[os.stat_result, list[os.DirEntry[str]]] | None:
        try:
            if st is None:
                st = os.stat(real_dir)
            with os.scandir(real_dir) as it:
                entries = list(it)
        except OSError as exc:
            self.report(shown, ProblemReason.UNREADABLE, f"the directory cannot be read: {exc.strerror}")
            self.unpinned = True  # nothing stamped says when it becomes readable
            return None
        entries.sort(key=_NAME)
        self.visited.add((st.st_dev, st.st_ino))
        return st, entries

    def walk(self) -> bool:
        """Walk the skill directory, depth first, each directory's files before its
        subdirectories, in name order; False once the entry budget is spent (the walk stops).
        A stack of directories, not recursion: a tree nested thousands deep costs its entries,
        as a flat one does, and never the interpreter's recursion limit."""
        stack: list[tuple[str, str, str, os.stat_result | None]] = [(self.root, "", self.root, None)]
        while stack:
            subdirs = self.visit(*stack.pop())
            if subdirs is None:
                return False
            stack.extend(reversed(subdirs))  # the first subdirectory is walked next, as recursion would
        return True

    def visit(
        self, real_dir: str, rel_prefix: str, shown: str, st: os.stat_result | None = None
    ) -> list[tuple[str, str, str, os.stat_result | None]] | None:
        """Walk one directory: its subdirectories to walk next, or None once the entry budget
        is spent (the walk stops).

        ``st`` is the directory's stat when the parent's walk took it (before this listing,
        so it stamps this directory as a fresh one would); the top directory is stat-ed here.
        One ``lstat`` per entry (``DirEntry.stat``), one ``stat`` more per link."""
        listed = self.entries(real_dir, shown, st)
        if listed is None:
            return []
        st, entries = listed
        self.stamps.append(stamp(rel_prefix[:-1], st))
        if rel_prefix and any(e.name == SKILL_MD for e in entries):
            self.nested.append(Path(shown))
        subdirs: list[tuple[str, str, str, os.stat_result | None]] = []
        found, stamps = self.found, self.stamps
        for entry in entries:
            self.seen += 1
            if self.seen > MAX_WALK_ENTRIES:
                return None
            name = entry.name  # text: the walk lists directories named by text
            if name in BUILD_OUTPUT_DIRS and entry.is_dir(follow_symlinks=False):
                continue
            rel = rel_prefix + name
            # The prefix passed this check when its directory was entered, and every rule but
            # the total length is per character or per segment: checking the new segment is
            # checking the path (the full path is checked when it is long, for the message).
            problem = name_problem(name) if len(rel) <= MAX_PATH_CHARS else relpath_problem(rel)
            if problem is not None:
                self.report(f"{shown}/{name}", ProblemReason.UNADDRESSABLE_FILENAME, f"not served: {problem}")
                continue
            if entry.is_symlink():
                linked = self.link_target(entry, f"{shown}/{name}")
                if linked is None:
                    continue
                target, tst = linked
            else:
                # Not a link inside a real directory: its real path is the directory's plus its
                # name, so there is no resolution and no containment check to make.
                try:
                    tst = entry.stat(follow_symlinks=False)
                except OSError:
                    self.report(
                        f"{shown}/{name}",
                        ProblemReason.SYMLINK_ESCAPE,
                        "not served: a link whose target does not exist",
                    )
                    continue
                target = ""
            mode = tst.st_mode
            if stat.S_ISREG(mode):
                rel = sys.intern(rel)  # rels repeat across skills
                found.append(SkillFile(rel, tst.st_size, tst.st_mtime_ns, tst.st_ino))
                stamps.append((rel, tst.st_ino, tst.st_size, tst.st_mtime_ns, tst.st_ctime_ns))
            elif stat.S_ISDIR(mode):
                if (tst.st_dev, tst.st_ino) in self.visited:
                    self.report(
                        f"{shown}/{name}", ProblemReason.SYMLINK_LOOP, "not descended: the directory was already walked"
                    )
                else:
                    self.visited.add((tst.st_dev, tst.st_ino))
                    subdirs.append((target or entry.path, f"{rel}/", f"{shown}/{name}", tst))
            else:
                self.report(f"{shown}/{name}", ProblemReason.SPECIAL_FILE, "not served: not a regular file")
        return subdirs


_NAME = attrgetter("name")
_NAME_MEMO_MAX = 8192
_name_memo: dict[str, str | None] = {}


def name_problem(name: str) -> str | None:
    """``relpath_problem`` of one path segment, remembered: names repeat across skills
    (references, guide.md, scripts), and the answer depends on the text alone."""
    try:
        return _name_memo[name]
    except KeyError:
        problem = relpath_problem(name)
        if len(_name_memo) < _NAME_MEMO_MAX:
            _name_memo[name] = problem
        return problem


def walk_skill(directory: Path, skill_name: str, priority: frozenset[str] = frozenset()) -> Walk:
    """List the servable files of the skill whose real directory is ``directory``; files in
    ``priority`` (declared scripts) are kept before others when the limits bite."""
    walker = _Walker(directory, skill_name)
    complete = walker.walk()
    walker.summary()
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
