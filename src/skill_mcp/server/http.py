"""Serving over Streamable HTTP (``serve_http``): the server stdio serves, on a listener."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from skill_mcp.logs import configure_logging
from skill_mcp.server.catalogs import announce_reloads, prebuild
from skill_mcp.server.compose import compose_parts, telemetry_for

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.config import Settings
    from skill_mcp.models import Catalog


def serve_http(
    settings: Settings,
    host: str,
    port: int,
    token: str | None,
    no_auth: bool,
    *,
    allowed_hosts: Iterable[str] = (),
    catalog_provider: Callable[[], Catalog] | None = None,
    server_factory: Callable[[Settings], Any] | None = None,
    metrics: str | None = None,
    **bounds: float,
) -> int:
    """Serve over Streamable HTTP (``surfaces.http.transport``) until SIGTERM/SIGINT; returns an exit code.

    The server is the one stdio serves; the runner's closers become the drain's stop hooks and
    the catalog watcher runs beside it. ``server_factory(settings)`` serves another
    ``mcp.server.lowlevel.Server`` with neither. ``bounds`` are ``drain_seconds`` /
    ``cancel_seconds``. Raises ``SkillMcpError`` (``http-*``) before binding on unsafe exposure.
    """
    from skill_mcp.surfaces.http.transport import Served, run_http

    configure_logging(settings.log_level)  # before the composition, which may log the roots' notes
    metrics = metrics if metrics is not None else settings.metrics
    telemetry = telemetry_for(settings, scrape=metrics is not None)
    if metrics is not None and telemetry is None:
        from skill_mcp.errors import SkillMcpError
        from skill_mcp.reasons import Refusal

        raise SkillMcpError(
            Refusal.HTTP_METRICS_UNAVAILABLE,
            "--metrics needs the OpenTelemetry SDK and its Prometheus exporter: pip install 'skillmcp[otel]'",
        )
    if server_factory is not None:
        served = Served(server_factory(settings), telemetry=telemetry)
    else:
        parts = compose_parts(settings, catalog_provider, telemetry, transport="tcp")

        async def watch() -> None:
            prebuild(parts.provider, parts.search, settings)
            await announce_reloads(parts.provider, parts.server)

        served = Served(parts.server, parts.closers, (watch,), telemetry=telemetry)
    try:
        return run_http(
            settings, host, port, token, no_auth, served=served, allowed_hosts=allowed_hosts, metrics=metrics, **bounds
        )
    finally:
        if telemetry is not None:
            telemetry.shutdown()
