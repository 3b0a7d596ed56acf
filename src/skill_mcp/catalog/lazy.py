"""A catalog provider that scans on first use, not at start-up.

Nothing in the MCP handshake (``initialize``, ``tools/list``) depends on the skills found, so
a server can answer both before it has looked at a single directory; the scan (O(N) in the
number of skills) is paid by the first request that needs the catalog. Thread-safe: concurrent
first callers share one build.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.config import Settings
    from skill_mcp.models import Catalog

log = logging.getLogger("skill_mcp.catalog")


class LazyCatalog:
    """``provider()`` returns the catalog, building it on the first call only."""

    def __init__(self, settings: Settings, *, generation: int = 0) -> None:
        self._settings = settings
        self._generation = generation
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None

    @property
    def built(self) -> bool:
        return self._catalog is not None

    def __call__(self) -> Catalog:
        catalog = self._catalog
        if catalog is not None:
            return catalog
        with self._lock:
            if self._catalog is None:
                # Imported here: the scanner's modules are not needed before the first scan.
                from skill_mcp.catalog.discover import build_catalog

                start = time.perf_counter()
                self._catalog = build_catalog(self._settings, generation=self._generation)
                log.debug("catalog built", extra={"skills": len(self._catalog.skills),
                                                 "problems": len(self._catalog.problems),
                                                 "ms": round((time.perf_counter() - start) * 1000, 1)})
            return self._catalog
