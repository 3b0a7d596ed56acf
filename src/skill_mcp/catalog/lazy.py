"""A catalog provider that scans once, on first use, not before the handshake is answered.

With the catalog cache, that scan checks each cached skill's listing tier only; ``refresh``
reloads the skills whose file tier an answer found changed (``catalog.filetier``).

Nothing in the MCP handshake (``initialize``, ``tools/list``) depends on the skills found, so
a server can answer both before it has looked at a single directory; the scan (O(N) in the
number of skills) is made by the first caller: a server's background build once it serves
(``server.prebuild``), or a request that needs the catalog sooner. Thread-safe: concurrent
first callers share one build.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.config import Settings
    from skill_mcp.models import Catalog, Skill

log = logging.getLogger("skill_mcp.catalog")


class LazyCatalog:
    """``provider()`` returns the catalog, building it on the first call only."""

    def __init__(
        self, settings: Settings, *, generation: int = 0, progress: Callable[[int, int], None] | None = None
    ) -> None:
        self._settings = settings
        self._generation = generation
        self._progress = progress  # build_catalog's progress, for the one build (a terminal's line)
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None
        self._on_build: Callable[[Catalog, float], None] | None = None

    def observe_builds(self, on_build: Callable[[Catalog, float], None]) -> None:
        """``on_build(catalog, seconds)`` once the catalog is built (telemetry)."""
        self._on_build = on_build

    @property
    def built(self) -> bool:
        return self._catalog is not None

    def __call__(self) -> Catalog:
        catalog = self._catalog
        if catalog is not None:
            return catalog
        with self._lock:
            if self._catalog is None:
                from skill_mcp.catalog import scan_helper

                try:
                    # Imported here: the scanner's modules are not needed before the first scan.
                    from skill_mcp.catalog.discover import build_catalog

                    # The listing tier only: each cached skill's file tier is checked by the first
                    # answer that carries facts about its files (``catalog.filetier``).
                    self._build(
                        lambda: build_catalog(
                            self._settings, generation=self._generation, progress=self._progress, check_files=False
                        )
                    )
                finally:  # a scan helper forked at start-up is not needed past the first build
                    scan_helper.dismiss()
            assert self._catalog is not None
            return self._catalog

    def _build(self, build: Callable[[], Catalog]) -> None:
        start = time.perf_counter()
        catalog = self._catalog = kept_for_life(build)
        seconds = time.perf_counter() - start
        log.debug(
            "catalog built",
            extra={"skills": len(catalog.skills), "problems": len(catalog.problems), "ms": round(seconds * 1000, 1)},
        )
        if self._on_build is not None:
            self._on_build(catalog, seconds)

    def refresh(self, catalog: Catalog, skills: Sequence[Skill]) -> Catalog:
        """The catalog with ``skills`` (whose file tier failed in ``catalog``) read from disk again,
        their cache entries replaced; it replaces ``catalog`` for every later request, so a
        listing shows what the reload found (a record changed, or the skill now refused). When
        another request already replaced ``catalog``, that newer catalog is returned as it is
        (the caller checks its records again)."""
        with self._lock:
            if self._catalog is catalog:
                from skill_mcp.catalog.discover import build_catalog
                from skill_mcp.catalog.filetier import reload_dirs

                dirs = reload_dirs(skills)
                self._build(
                    lambda: build_catalog(self._settings, generation=catalog.generation, check_files=False, reload=dirs)
                )
                log.info("catalog refreshed: a skill's files changed", extra={"skills": sorted(s.name for s in skills)})
            assert self._catalog is not None
            return self._catalog


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while a large, acyclic, long-lived structure is built (a catalog
    here, the search index in ``search.build``), then back as it was: a collector someone else
    turned off stays off."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def kept_for_life(build: Callable[[], Catalog]) -> Catalog:
    """``build()``, with the cyclic collector kept off the records it makes.

    A catalog is about a hundred container objects per skill, made at once and kept until the
    process ends; none is ever cyclic garbage (the records are immutable and point only down).
    Left alone, the collector would walk all of them several times while they are made, and
    again in full passes during the first requests after (the new objects count towards the
    next full collection); at 10,000 skills that was a few hundred milliseconds of the first
    listing (bench/README.md, "Figures behind design choices"). So the collector pauses for the
    build, and ``gc.freeze`` then moves everything alive into the permanent generation, which
    collections skip, before the collector is enabled again. Only ``LazyCatalog``'s builds are
    frozen: its one build, and the rare rebuild its ``refresh`` makes when a skill's files
    changed (the catalog it replaces is acyclic, so reference counting frees it, frozen or not);
    a reloading one (``watch.LiveCatalog``) is replaced on every change, so its builds are not.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        catalog = build()
        # Frozen before the collector is back: the first allocation after ``gc.enable`` would
        # otherwise start a collection of the youngest generation, which holds every object the
        # build made (at 10,000 skills a walk of about 40 ms of CPU that frees nothing).
        gc.freeze()
    finally:
        if was:
            gc.enable()
    return catalog
