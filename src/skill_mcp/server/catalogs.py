"""The catalog a server serves from: which provider (``catalog_source``), its build ahead of
the first request (``prebuild``) and, for a reloading one, the announcements of each reload
(``announce_reloads``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from skill_mcp.catalog.lazy import LazyCatalog

if TYPE_CHECKING:  # pragma: no cover - typing only
    import threading

    from skill_mcp.config import Settings
    from skill_mcp.models import Catalog
    from skill_mcp.surfaces.search_tool import SearchState

log = logging.getLogger("skill_mcp.server")


def static_catalog(settings: Settings) -> Callable[[], Catalog]:
    """The catalog, built once: by ``prebuild`` as soon as the server serves, or by a first
    request that needs it sooner. The handshake reads no directory.

    Nothing in ``initialize`` or ``tools/list`` depends on the skills found, so the scan
    (O(N) in skills) is kept off the handshake; ``LazyCatalog`` logs its size (debug) once built.
    """
    return LazyCatalog(settings)


def catalog_source(settings: Settings) -> Callable[[], Catalog]:
    """The catalog provider a transport serves from.

    With ``settings.watch`` a reloading provider belongs here (``serve --watch``): a zero-arg
    callable returning the current catalog that also has ``async def run(on_change)``, a
    watcher loop that swaps the catalog and then awaits ``on_change()``. ``announce_reloads``
    runs that loop beside the server and ``on_change`` tells connected clients.
    """
    if settings.watch:
        from skill_mcp.catalog.watch import LiveCatalog

        return LiveCatalog(settings)
    return static_catalog(settings)


async def announce_reloads(provider: Callable[[], Catalog], server: Any) -> None:
    """Run ``provider.run(on_change)`` when the provider reloads and the server can announce.

    Returns at once for a static catalog; transports start it in their task group and cancel
    it when they stop.
    """
    run = getattr(provider, "run", None)
    announcer = getattr(server, "announcer", None)
    if not callable(run) or announcer is None:
        return
    await run(announcer.announce)


def prebuild(
    provider: Callable[[], Catalog], search: SearchState | None = None, settings: Settings | None = None
) -> threading.Thread | None:
    """Build the catalog, then open or start its search index, in a background thread: called
    once the server serves, so that a host's first catalog request, which usually comes well
    after the handshake, finds both ready instead of paying for them. The handshake still reads
    no directory. A request that comes first builds them itself and the thread then finds them
    built (``LazyCatalog`` and ``SearchState`` each build once, under a lock). A provider that
    is built already or builds on its own (``--watch``) is left alone; so is a failure, which
    the first request meets again and reports. With ``settings``, the scan helper is forked
    first, unless one waits already (``serve_stdio_early`` forks it before the handshake): a
    build in a thread cannot fork one, and would scan alone. Returns the thread, or None when
    none started."""
    if getattr(provider, "built", True):
        return None
    if settings is not None:
        from skill_mcp.catalog import scan_helper

        scan_helper.start_for(settings.cache_dir, list(settings.roots))

    def run() -> None:
        try:
            catalog = provider()
            if search is not None:
                search.index_for(catalog)
        except Exception as exc:  # the first request that needs the catalog builds it again, and says why
            log.info("catalog not built ahead of the first request", extra={"why": str(exc)[:200]})

    import threading

    thread = threading.Thread(target=run, name="skill-mcp-prebuild", daemon=True)
    thread.start()
    return thread
