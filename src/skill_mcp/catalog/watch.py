"""Live reload for ``serve --watch``: rebuild the catalog when files change, swap it atomically.

``LiveCatalog`` holds the catalog a server reads; requests call it (it is the server's
``catalog_provider``) and always see one whole catalog, never a half-built one, because a
new catalog is built completely off to the side and then swapped in with one assignment.

``reload_on_change`` waits for file changes under the roots (``watchfiles``, debounced), rebuilds,
and swaps when what is served actually changed; then it calls ``on_swap`` so the surfaces can
tell clients (``notifications/*/list_changed``).

Half-written files: an editor saving SKILL.md, or a copy still in progress, can leave a skill
momentarily unparsable. A skill that was served and now fails with a parse-type error while
its directory still exists keeps its previous record in the new catalog, with a
``reload-kept-previous`` warning, until a later change makes it parse again (or removes it).
A deliberately broken skill therefore stays served in its last good form until the server
restarts; ``skill-mcp validate`` reports it either way.

This module imports no ``mcp``: it is the catalog's second provider, beside ``catalog.lazy``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import Settings
from skill_mcp.models import Catalog, Problem, Skill
from skill_mcp.reasons import Level, ProblemReason

log = logging.getLogger("skill_mcp.watch")

DEBOUNCE_MS = 400  # group a burst of writes (an editor's save, a git checkout) into one rebuild
STEP_MS = 50
CATCH_UP_MS = 500  # how soon after start the watcher checks for changes it could not see
# Reasons that mean "the file is there but not readable as a skill right now" - what a file
# that is still being written looks like.
TRANSIENT = frozenset(
    {
        ProblemReason.FRONTMATTER_PARSE,
        ProblemReason.FRONTMATTER_INVALID,
        ProblemReason.UNREADABLE,
        ProblemReason.NO_SKILL_MD,
    }
)


class LiveCatalog:
    """The current catalog, reloaded while ``run`` watches the roots.

    Calling it returns the catalog (scanned on first use, like ``catalog.lazy.LazyCatalog``, so
    start-up does not wait for the scan); ``swap`` replaces it whole. This is the provider
    ``server.serve_stdio`` and ``server.serve_http`` take for ``--watch``: they run
    ``await provider.run(on_change)`` beside the server, with ``on_change`` announcing
    ``list_changed`` to the connected clients.
    """

    def __init__(self, settings: Settings, catalog: Catalog | None = None) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._catalog = catalog
        self._on_build: Callable[[Catalog, float], None] | None = None

    def observe_builds(self, on_build: Callable[[Catalog, float], None]) -> None:
        """``on_build(catalog, seconds)`` after every build or reload (telemetry)."""
        self._on_build = on_build

    def built(self, catalog: Catalog, seconds: float) -> None:
        if self._on_build is not None:
            self._on_build(catalog, seconds)

    def __call__(self) -> Catalog:
        catalog = self._catalog  # one attribute read: a request sees the old or the new, never a mix
        if catalog is not None:
            return catalog
        with self._lock:
            if self._catalog is None:
                start = time.perf_counter()
                # The listing tier only, as ``catalog.lazy``: the file tier waits for an answer
                # that needs it. Rebuilds after a change check both (``rebuild``).
                self._catalog = build_catalog(self._settings, check_files=False)
                self.built(self._catalog, time.perf_counter() - start)
            return self._catalog

    def swap(self, catalog: Catalog) -> None:
        with self._lock:
            self._catalog = catalog

    def refresh(self, catalog: Catalog, skills: Sequence[Skill]) -> Catalog:
        """As ``catalog.lazy.LazyCatalog.refresh``: ``skills`` read from disk again, swapped in
        (a skill that no longer loads keeps its previous record, as after any rebuild). The
        watcher announces changes it sees itself; this swap announces nothing."""
        from skill_mcp.catalog.filetier import reload_dirs

        with self._lock:
            if self._catalog is catalog:
                start = time.perf_counter()
                fresh = build_catalog(
                    self._settings, generation=catalog.generation, check_files=False, reload=reload_dirs(skills)
                )
                self._catalog = keep_previous(catalog, fresh)
                self.built(self._catalog, time.perf_counter() - start)
            assert self._catalog is not None
            return self._catalog

    async def run(self, on_change: Callable[[], Awaitable[None]]) -> None:
        """Watch the roots until cancelled; after each swap, ``await on_change()``."""
        await anyio.to_thread.run_sync(self)  # the baseline to compare the first change with
        await reload_on_change(self._settings, self, on_change)


def fingerprint(catalog: Catalog) -> tuple[Any, ...]:
    """What clients can observe of a catalog: skills, their files as scanned, and the problems."""
    skills = tuple(
        (name, s.path, s.directory, s.description, s.files, s.declaration, s.skills_list_excluded)
        for name, s in catalog.skills.items()
    )
    return skills, tuple(catalog.problems)


def keep_previous(previous: Catalog, fresh: Catalog) -> Catalog:
    """``fresh`` with each skill that just became unparsable replaced by its previous record."""
    failing: dict[str, Problem] = {}
    for problem in fresh.problems:
        if problem.level == Level.ERROR and problem.reason in TRANSIENT and problem.skill:
            failing.setdefault(problem.skill, problem)
    kept = {
        name: skill
        for name, skill in previous.skills.items()
        if name in failing and name not in fresh.skills and os.path.isdir(skill.directory)
    }
    if not kept:
        return fresh
    problems = [p for p in fresh.problems if p.skill not in kept]
    for name, skill in sorted(kept.items()):
        why = failing[name]
        problems.append(
            Problem(
                skill.found_at,
                ProblemReason.RELOAD_KEPT_PREVIOUS,
                f"the previous version stays served: the skill does not load right now ({why.reason}: {why.detail})",
                Level.WARNING,
                name,
            )
        )
    skills = dict(sorted({**fresh.skills, **kept}.items()))
    return replace(fresh, skills=skills, problems=tuple(problems))


def rebuild(settings: Settings, live: LiveCatalog, generation: int) -> bool:
    """Build a new catalog; swap it in when it differs from the live one. True when swapped."""
    previous = live()
    start = time.perf_counter()
    # Both tiers: a file rewritten in place changes no directory stamp, and a record reused
    # unchecked would compare equal to the previous one and never be swapped.
    fresh = keep_previous(previous, build_catalog(settings, generation=generation, check_files=True))
    seconds = time.perf_counter() - start
    if fingerprint(fresh) == fingerprint(previous):
        return False
    live.swap(fresh)
    live.built(fresh, seconds)
    log.info(
        "catalog reloaded",
        extra={"generation": generation, "skills": len(fresh.skills), "problems": len(fresh.problems)},
    )
    return True


def watched_paths(settings: Settings) -> list[Path]:
    """Roots that exist (a missing root is watched through its parent, so creating it counts)."""
    paths: list[Path] = []
    for root in settings.roots:
        path = root if root.is_dir() else root.parent
        if path.is_dir() and path not in paths:
            paths.append(path)
    return paths


async def reload_on_change(
    settings: Settings,
    live: LiveCatalog,
    on_swap: Callable[[], Awaitable[None]],
    *,
    stop_event: anyio.Event | None = None,
    debounce_ms: int = DEBOUNCE_MS,
) -> None:
    """Rebuild and swap on every debounced batch of changes until cancelled or ``stop_event``."""
    from watchfiles import awatch

    paths = watched_paths(settings)
    if not paths:
        log.warning("serve --watch: no root exists; nothing to watch")
        return
    generation = live().generation
    caught_up = False
    # yield_on_timeout: the first (empty) batch proves the watcher is running, and one rebuild
    # then catches whatever changed between the baseline scan and the watcher starting.
    async for changes in awatch(
        *paths,
        debounce=debounce_ms,
        step=STEP_MS,
        stop_event=stop_event,
        recursive=True,
        ignore_permission_denied=True,
        yield_on_timeout=True,
        rust_timeout=CATCH_UP_MS,
    ):
        if not changes and caught_up:
            continue
        caught_up = True
        generation += 1
        swapped = await anyio.to_thread.run_sync(rebuild, settings, live, generation)
        if swapped:
            await on_swap()
