"""Build an immutable ``Catalog`` from what ``catalog.layouts`` found under the configured roots.

Each candidate is loaded once (or taken from the persistent cache while its stamps hold,
``catalog.cache``; a cold scan is shared with the scan helper or worker processes,
``catalog.parallel_scan``). Nested skills (a SKILL.md below another skill) are published flat
as their own skills. This is the one discovery: ``index``, ``list``, ``pack`` checks and the
server all read its answer.

Naming is a security rule: a skill is served under its directory name (for a symlinked
skill directory, its target's name), so a bundle cannot claim a neighbour's name and with it
the neighbour's grants. Two different directories that arrive at one name are both refused.
A directory reached twice (a link to a skill also listed directly) is one skill; a link that
leads out of its root is refused.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from skill_mcp.catalog import scan_helper
from skill_mcp.catalog.files import DigestMemo, file_digest
from skill_mcp.catalog.layouts import Found, find, inside
from skill_mcp.catalog.lazy import collector_paused
from skill_mcp.catalog.loaded import Loaded
from skill_mcp.catalog.packs import apply_packs
from skill_mcp.catalog.scan_helper import HELPER_FROM
from skill_mcp.config import Settings
from skill_mcp.models import Catalog, Problem, Skill, SkillFile
from skill_mcp.paths import path_under
from skill_mcp.reasons import Level, ProblemReason

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog.cache import CatalogCache
    from skill_mcp.catalog.parallel_scan import Job, Preloaded

log = logging.getLogger("skill_mcp.catalog")

# A nested skill is served when its directory is at most this many levels below the top-level
# skill that holds it (``skill://top/a/b/SKILL.md`` is two); a SKILL.md deeper than that is
# reported (``nested-too-deep``) and its files stay files of the skill around it. Each nested
# skill walks its own tree again, so a chain of SKILL.md files nested one inside another costs
# the square of its length: 150 of them cost 7.7 s here, 300 cost 90 s. The bound keeps a
# directory's entries walked by at most this many skills and one.
NESTED_MAX_DEPTH = 8


def _open_cache(settings: Settings, roots_real: list[str]) -> CatalogCache | None:
    if settings.cache_dir is None or not roots_real:
        return None
    from skill_mcp.catalog.cache import CatalogCache, cache_file

    return CatalogCache(cache_file(settings.cache_dir, roots_real))


Progress = Callable[[int, int], None]  # (done, known so far): skills loaded, candidates found


def preload(jobs: list[Job]) -> Preloaded:
    """``parallel_scan.preload``, imported by the first cold scan: a warm build never needs the
    scanner's modules, and its first answer does not wait for their import."""
    from skill_mcp.catalog.parallel_scan import preload as share

    return share(jobs)


def load_skill(real_dir: Path, found_at: Path, root_real: Path) -> Loaded:
    """``catalog.skill.load_skill``, imported by the first skill read from disk, as ``preload``."""
    from skill_mcp.catalog.skill import load_skill as load

    return load(real_dir, found_at, root_real)


def _load_alone(real_dir: Path, found_at: Path, root_real: Path) -> Loaded:
    """``load_skill``, whose failure costs its own skill only: a loader that raises on what one
    directory holds (every such case known is a refusal with its own reason; this is for the
    next one) refuses that directory (``load-failed``, the traceback in the log) and the build
    goes on. The result is never cached (no stamps), so the next build tries again."""
    try:
        return load_skill(real_dir, found_at, root_real)
    except Exception as exc:  # any defect, contained to the skill that met it
        log.exception("a skill could not be loaded", extra={"skill": str(found_at)})
        detail = f"not served: loading it failed ({type(exc).__name__}); the server's log has the details"
        return Loaded(None, (Problem(str(found_at), ProblemReason.LOAD_FAILED, detail, Level.ERROR),))


def _jobs(found: Found, keep: Callable[[str], bool] | None = None) -> list[Job]:
    """What a cold scan shares out (``preload``): the candidates the loop below would load, in
    its order, each real directory once, at the first place it was found, none whose link leads
    out of its root; with ``keep``, only the real directories it keeps."""
    jobs: list[Job] = []
    seen: set[str] = set()
    for found_at, root_real in found.queue:
        real = found.reals.get(found_at) or os.path.realpath(found_at)
        if real in seen or not inside(root_real, real):
            continue
        seen.add(real)
        if keep is None or keep(real):
            jobs.append((real, found_at, root_real))
    return jobs


def _load_all(
    found: Found,
    cache: CatalogCache | None,
    progress: Progress | None = None,
    *,
    check_files: bool = True,
    reload: frozenset[str] = frozenset(),
) -> tuple[dict[str, Skill], set[str]]:
    """Load (or take from the cache) every candidate once; the skills by real directory, and the
    prefixes of those whose result the stamps pin (the cache may keep their digests). A
    directory in ``reload`` is read from disk whatever the cache holds."""
    loaded: dict[str, Skill] = {}
    stampable: set[str] = set()
    queue = found.queue
    helper: scan_helper.Helper | None = None
    preloaded: Preloaded | None = None  # a warm build shares nothing: every candidate is the cache's
    # A cold scan shares the candidates with the scan helper or worker processes (parallel_scan);
    # the loop below takes each result they delivered and loads the rest itself.
    if cache is None or cache.held == 0:
        preloaded = preload(_jobs(found))
    elif len(queue) - cache.held >= HELPER_FROM:
        # A cache that cannot hold that many of the candidates (a catalog grown since it was
        # written): the candidates it has no entry for are scanned as a cold scan is.
        preloaded = preload(_jobs(found, lambda real: not cache.holds(real)))
    else:  # a warm build: a scan helper waiting for this build only checks stamps (``verdicts``)
        helper = scan_helper.take()
        if helper is not None:
            if helper.verdicts is not None:
                cache.take_verdicts(helper.verdicts)
            else:
                helper.close()
                helper = None
    try:
        done = _load_queue(found, cache, preloaded, loaded, stampable, progress, check_files, reload)
    finally:
        if preloaded is not None:
            preloaded.close()
        if helper is not None and cache is not None:
            cache.verdicts = None  # before its pipe is closed: a closed descriptor's number is reused
            helper.close()
    if progress is not None:
        progress(done, done)
    return loaded, stampable


def _load_queue(
    found: Found,
    cache: CatalogCache | None,
    preloaded: Preloaded | None,
    loaded: dict[str, Skill],
    stampable: set[str],
    progress: Progress | None,
    check_files: bool,
    reload: frozenset[str],
) -> int:
    """``_load_all``'s loop: every candidate in ``found.queue`` once; how many it took."""
    seen: set[str] = set()
    nested_in: dict[str, str] = {}  # found_at of a nested skill -> the path of the directory holding it
    # found_at of each nested skill queued -> how many levels its directory is below the top-level
    # skill holding it. Each walk lists every SKILL.md below it, so a nested skill is met again
    # in the walk of every nested skill around it: it is queued the first time only.
    nested_depth: dict[str, int] = {}
    root_paths: dict[str, Path] = {}  # each root's real path as a Path, made once
    queue, problems = found.queue, found.problems
    done = 0
    reals, skill_mds = found.reals, found.skill_md
    root_heads: dict[str, str] = {}  # each root's real path with its trailing slash, made once
    reuse = cache.reuse if cache is not None else None
    while queue:
        if progress is not None:
            progress(done, done + len(queue))
        done += 1
        found_at, root_real = queue.popleft()
        real = reals.get(found_at) or os.path.realpath(found_at)
        head = root_heads.get(root_real)
        if head is None:
            head = root_heads[root_real] = root_real if root_real.endswith("/") else root_real + "/"
        if real != root_real and not real.startswith(head):  # ``layouts.inside(root_real, real)``
            problems.append(
                Problem(found_at, ProblemReason.SYMLINK_ESCAPE, f"not served: the link leads out of its root to {real}")
            )
            continue
        if real in seen:
            continue
        seen.add(real)
        # ``os.path.basename`` of each compared, without two calls per skill: a path ending in
        # ``/<name>`` has that basename (the slices only for a path without that ending).
        tail = real[real.rfind("/") :]
        if (
            not found_at.endswith(tail)
            and found_at[found_at.rfind("/") + 1 :] != (real_name := tail[1:])
            and found_at != root_real
        ):
            problems.append(
                Problem(
                    found_at,
                    ProblemReason.NAME_MISMATCH,
                    f"a link to {real_name!r}: served under its target's name {real_name!r}; "
                    "write grants against that name",
                    Level.WARNING,
                    real_name,
                )
            )
        result = (
            reuse(real, found_at, root_real, files=check_files, skill_md=skill_mds.pop(found_at, None))
            if reuse is not None and real not in reload
            else None
        )
        if result is None:
            result = None if preloaded is None else preloaded.pop((real, found_at, root_real), None)
            if result is None:
                root = root_paths.get(root_real)
                if root is None:
                    root = root_paths[root_real] = Path(root_real)
                directory = path_under(root, root_real, real)
                # Found where it lives (not through a link): one Path serves as both.
                result = _load_alone(directory, directory if found_at == real else Path(found_at), root)
            if cache is not None:
                cache.record(real, found_at, root_real, result)
        if result.problems:
            problems.extend(result.problems)
        skill = result.skill
        if skill is not None:
            enclosing = nested_in.get(found_at)
            if enclosing is not None:
                # A nested skill's URI carries the enclosing skill's path as its prefix
                # (skill://parent/child/SKILL.md), so its files have the URIs they have inside
                # the enclosing skill, and its name stays the final segment.
                skill = replace(skill, path=f"{enclosing}/{skill.name}")
            loaded[real] = skill
            if result.stampable:
                stampable.add(skill.prefix)
        for at in _nested_to_load(result.nested, found_at, skill, nested_depth, nested_in, problems):
            queue.append((at, root_real))
    return done


def _nested_to_load(
    nested: tuple[Path, ...],
    found_at: str,
    skill: Skill | None,
    nested_depth: dict[str, int],
    nested_in: dict[str, str],
    problems: list[Problem],
) -> list[str]:
    """The nested skills the walk of ``found_at`` met that are still to be loaded: each once
    (``nested_depth`` remembers those met, and how deep), down to ``NESTED_MAX_DEPTH`` levels below
    the top-level skill (deeper: ``nested-too-deep``); ``nested_in`` learns where each is published."""
    depth = nested_depth.get(found_at, 0)
    out = []
    for path in nested:
        at = str(path)
        if at in nested_depth:
            continue
        between = os.path.relpath(os.path.dirname(path), found_at)
        levels = nested_depth[at] = depth + 1 + (0 if between == "." else between.count("/") + 1)
        if levels > NESTED_MAX_DEPTH:
            detail = (
                f"not served as a skill: {levels} levels below the top-level skill holding it, where nested "
                f"skills are served down to {NESTED_MAX_DEPTH}; its files are files of the skill around it"
            )
            owner = None if skill is None else skill.name
            problems.append(Problem(at, ProblemReason.NESTED_TOO_DEEP, detail, Level.WARNING, owner))
            continue
        if skill is not None:
            nested_in[at] = skill.skill_path if between == "." else f"{skill.skill_path}/{Path(between).as_posix()}"
        out.append(at)
    return out


def _by_name(kept: list[Skill], problems: list[Problem]) -> dict[str, Skill]:
    """Skills by name, sorted; two directories claiming one name are both refused."""
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
            problems.append(
                Problem(
                    skill.found_at,
                    ProblemReason.DUPLICATE_NAME,
                    f"refused: {len(group)} directories claim the name {name!r} ({others})",
                    Level.ERROR,
                    name,
                )
            )
    return skills


def build_catalog(
    settings: Settings,
    *,
    generation: int = 0,
    memo: DigestMemo | None = None,
    cache: CatalogCache | None = None,
    progress: Progress | None = None,
    check_files: bool = True,
    reload: frozenset[str] = frozenset(),
) -> Catalog:
    """Scan every root once. One bad skill costs itself, never the listing.

    Skills inside a pack are checked against its SHA-256 pins (``catalog.packs``); ``memo``
    lets the server reuse those digests later. With ``settings.cache_dir`` set, each skill's
    scan result is taken from the persistent cache while every file it depends on is unchanged
    (``catalog.cache``), and the cache is brought up to date; ``cache`` overrides that (tests
    pass one with an injected clock). ``progress(done, known)`` is called before each skill is
    read and once at the end (a command line shows it on a terminal).

    ``check_files`` False checks only the listing tier of each cached result (SKILL.md and the
    directories) and leaves each skill's file tier to ``catalog.filetier``, which a server runs
    before the first answer that carries facts about that skill's files; a caller that reads
    file facts from the catalog itself (the commands, ``validate``) keeps the default. The real
    directories in ``reload`` are read from disk whatever the cache holds (what the file tier
    found changed), and their entries replaced.
    """
    # A build allocates some ten containers a skill, none in a cycle, and the full collections
    # they would set off walk every object of the process (bench/README.md, "Figures behind
    # design choices"); what a build drops is freed by reference counting as ever.
    with collector_paused():
        return _build(settings, generation, memo, cache, progress, check_files, reload)


def _build(
    settings: Settings,
    generation: int,
    memo: DigestMemo | None,
    cache: CatalogCache | None,
    progress: Progress | None,
    check_files: bool,
    reload: frozenset[str],
) -> Catalog:
    found = find(settings)
    cache = cache or _open_cache(settings, found.roots_real)
    digests = memo or DigestMemo()
    try:
        loaded, stampable = _load_all(found, cache, progress, check_files=check_files, reload=reload)
        digest: Callable[[Skill, SkillFile], str] = (
            (lambda skill, entry: file_digest(digests, skill, entry))
            if cache is None
            else cache.digest_fn(digests, lambda skill: skill.prefix in stampable)
        )
        kept, pack_problems = apply_packs(list(loaded.values()), [Path(d) for d in found.pack_dirs], digest=digest)
        if cache is not None:
            cache.save()
            log.debug("catalog cache", extra={"reused": cache.reused, "loaded": cache.loaded})
    finally:
        if cache is not None:
            cache.close()
    found.problems.extend(pack_problems)
    skills = _by_name(kept, found.problems)
    packs = tuple(sorted({Path(os.path.realpath(d)) for d in found.pack_dirs}))
    return Catalog(
        skills=skills,
        problems=tuple(found.problems),
        roots=tuple(Path(r) for r in found.roots_real),
        generation=generation,
        packs=packs,
    )
