"""``skill-mcp serve --http HOST:PORT``: the server over Streamable HTTP (through the SDK).

The MCP server object is the same one stdio serves; this module only puts the SDK's
Streamable HTTP app (both protocol eras: the handshake era with ``Mcp-Session-Id`` and the
2026-07-28 per-request era) behind ``GuardMiddleware`` and runs it with uvicorn.

Shutdown (SIGTERM or SIGINT), in order:

1. stop accepting connections; refuse new work with 503 (``http-draining``);
2. let calls in flight finish, for at most ``drain_seconds``;
3. ask the server to stop whatever still runs (``aclose``: running scripts are killed as a
   process group by the runner), then cancel what is left - open notification streams and any
   call past the bound - within ``cancel_seconds``;
4. exit. The process never outlives its scripts: the runner's spawner owns their process
   groups and kills them when the call that started them is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp

from skill_mcp.config import Settings
from skill_mcp.surfaces.http_guard import (
    ExposurePolicy,
    GuardMiddleware,
    decide_exposure,
    describe,
    parse_host_port,
)

__all__ = ["HttpApp", "build_http_app", "parse_host_port", "serve_http"]

logger = logging.getLogger("skill_mcp.http")

MCP_PATH = "/mcp"
DRAIN_SECONDS = 10.0
CANCEL_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class HttpApp:
    """The ASGI app to serve and the guard in front of it (the guard drives the drain)."""

    asgi: ASGIApp
    guard: GuardMiddleware


def _transport_security(policy: ExposurePolicy) -> Any:
    """The SDK's own Host/Origin check, fed the same list: a second wall behind the guard."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = sorted(policy.allowed_hosts)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
        allowed_origins=[f"{scheme}://{h}{port}" for scheme in ("http", "https") for h in hosts
                         for port in ("", ":*")],
    )


def build_http_app(
    server: Any,
    policy: ExposurePolicy,
    *,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> HttpApp:
    """Wrap an ``mcp.server.lowlevel.Server`` for Streamable HTTP behind the guard.

    ``on_shutdown`` runs when the app's lifespan ends, before the SDK cancels the sessions'
    tasks (the server's chance to stop running scripts and answer their calls).
    """
    starlette_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=policy.host,
        transport_security=_transport_security(policy),
    )
    if on_shutdown is not None:
        inner_lifespan = starlette_app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            async with inner_lifespan(app):
                try:
                    yield
                finally:
                    await on_shutdown()

        starlette_app.router.lifespan_context = lifespan
    guard = GuardMiddleware(starlette_app, policy)
    return HttpApp(asgi=guard, guard=guard)


def _bind(host: str, port: int) -> socket.socket:
    """Bind before uvicorn starts so the actual port (``0`` = any) is known and logged."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.set_inheritable(False)
    except OSError:
        sock.close()
        raise
    return sock


def _make_uvicorn_server(app: HttpApp, drain_seconds: float, cancel_seconds: float) -> Any:
    import uvicorn

    class DrainingServer(uvicorn.Server):
        """uvicorn's shutdown, preceded by a bounded drain of the calls in flight."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises the captured signal after its shutdown, so the process would
            # die by SIGTERM even after a clean drain; a clean drain exits 0 instead.
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            for server in self.servers:
                server.close()
            app.guard.start_draining()
            pending = app.guard.in_flight
            try:
                await asyncio.wait_for(app.guard.wait_idle(), timeout=drain_seconds)
                drained = True
            except TimeoutError:
                drained = False
            logger.info("http drain finished", extra={"event": "http-drained", "inFlightAtSignal": pending,
                                                      "drained": drained, "left": app.guard.in_flight})
            await super().shutdown(sockets)

    config = uvicorn.Config(
        app.asgi,
        lifespan="on",
        # uvicorn's default log config writes access lines to stdout; logs belong on stderr.
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=max(cancel_seconds, 0.1),
        # A notification stream would otherwise keep a worker alive past the drain.
        timeout_keep_alive=5,
    )
    return DrainingServer(config)


def serve_http(
    settings: Settings,
    host: str,
    port: int,
    token: str | None,
    no_auth: bool,
    *,
    allowed_hosts: Iterable[str] = (),
    server_factory: Callable[[Settings], Any] | None = None,
    drain_seconds: float = DRAIN_SECONDS,
    cancel_seconds: float = CANCEL_SECONDS,
) -> int:
    """Serve until SIGTERM/SIGINT. Raises ``SkillMcpError`` (``http-*`` reasons) before binding
    when the exposure is unsafe; returns 0 after a clean shutdown.

    ``server_factory(settings)`` returns the MCP server (``mcp.server.lowlevel.Server``), or an
    object with ``.server`` and an async ``aclose()``; by default the one stdio serves.
    """
    from skill_mcp.logs import configure_logging

    configure_logging(settings.log_level)
    policy = decide_exposure(host, port, token, no_auth, allowed_hosts)
    if not policy.authenticated:
        logger.warning(
            "SERVING WITHOUT AUTHENTICATION (--no-auth): any local process and any local user can call "
            "this server, including skill_run", extra={"event": "http-no-auth", **describe(policy)})
    server, aclose = _resolve_server(settings, server_factory)
    app = build_http_app(server, policy, on_shutdown=aclose)
    sock = _bind(policy.host, policy.port)
    bound_port = sock.getsockname()[1]
    url = f"http://{_url_host(policy.host)}:{bound_port}{MCP_PATH}"
    # The URL is in the message itself (not only in the structured fields) so any log format
    # shows it; the test harness reads it to learn the port when binding port 0.
    logger.warning("http listening on %s", url, extra={"event": "http-listening", **describe(policy),
                                                       "port": bound_port, "url": url})
    uv = _make_uvicorn_server(app, drain_seconds, cancel_seconds)
    try:
        uv.run(sockets=[sock])
    finally:
        sock.close()
    logger.info("http stopped", extra={"event": "http-stopped"})
    return 0


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _resolve_server(
    settings: Settings, factory: Callable[[Settings], Any] | None
) -> tuple[Any, Callable[[], Awaitable[None]] | None]:
    if factory is None:
        from skill_mcp.server import build_server  # the server stdio runs; heavy, so imported late

        factory = build_server
    built = factory(settings)
    server = getattr(built, "server", built)
    aclose = getattr(built, "aclose", None)
    return server, aclose
