"""``skill-mcp serve --http HOST:PORT``: the server over Streamable HTTP (through the SDK).

The MCP server object is the same one stdio serves; this module only puts the SDK's
Streamable HTTP app (both protocol eras: the handshake era with ``Mcp-Session-Id`` and the
2026-07-28 per-request era) behind ``GuardMiddleware`` and ``EventSizing`` (answers as JSON
when they can be, never an event a client refuses) and runs it with uvicorn, whose connections
go through ``surfaces.http.protocol`` (a request-head deadline, connection caps that evict the
oldest waiting connection, and an in-flight limit; the bounds are in ``surfaces.http.conn``).

Shutdown (SIGTERM or SIGINT), in order:

1. refuse new work with 503 (``http-draining``); requests of an existing session still pass
   (a call may be waiting on its confirmation), and the listener stays open for them;
2. let calls in flight finish, for at most ``drain_seconds``;
3. past that bound, run the stop hooks (the runner's ``closers``: running scripts are
   stopped, so their calls return a result and are answered), and wait ``cancel_seconds``
   more for those answers;
4. close what is left (notification streams) and end the lifespan, which cancels every
   session task; a script still running is then killed with its process group by the
   spawner, whose cleanup runs on cancellation;
5. exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import math
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import anyio
import uvicorn
from sse_starlette.sse import AppStatus
from starlette.types import ASGIApp

from skill_mcp.config import Settings
from skill_mcp.surfaces.http.conn import DEFAULT_LIMITS, ConnectionGate
from skill_mcp.surfaces.http.events import EventSizing
from skill_mcp.surfaces.http.guard import ExposurePolicy, GuardMiddleware, decide_exposure, describe
from skill_mcp.surfaces.http.protocol import GatedH11Protocol, Shedding

__all__ = ["HttpApp", "Served", "build_http_app", "run_http"]

logger = logging.getLogger("skill_mcp.http")

MCP_PATH = "/mcp"
DRAIN_SECONDS = 10.0
CANCEL_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class HttpApp:
    """The ASGI app to serve, the guard in front of it (it drives the drain), and the hooks
    that stop running work when the drain bound is reached (``Plugins.closers``)."""

    asgi: ASGIApp
    guard: GuardMiddleware
    stop_hooks: tuple[Callable[[], Any], ...] = ()


def _transport_security(policy: ExposurePolicy) -> Any:
    """The SDK's own Host/Origin check, fed the same list: a second wall behind the guard."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = sorted(policy.allowed_hosts)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
        allowed_origins=[f"{scheme}://{h}{port}" for scheme in ("http", "https") for h in hosts for port in ("", ":*")],
    )


def build_http_app(
    server: Any,
    policy: ExposurePolicy,
    *,
    stop_hooks: Iterable[Callable[[], Any]] = (),
    background: Iterable[Callable[[], Coroutine[Any, Any, None]]] = (),
    telemetry: Any = None,
    metrics_path: str | None = None,
) -> HttpApp:
    """Wrap an ``mcp.server.lowlevel.Server`` for Streamable HTTP behind the guard.

    ``background`` tasks (the catalog watcher of ``--watch``) run for the app's lifetime and are
    cancelled when it stops.
    """
    starlette_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=policy.host,
        transport_security=_transport_security(policy),
    )
    tasks = tuple(background)
    if tasks:
        inner = starlette_app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            async with inner(app), anyio.create_task_group() as tg:
                for task in tasks:
                    tg.start_soon(task)
                yield
                tg.cancel_scope.cancel()

        starlette_app.router.lifespan_context = lifespan
    inner_app: ASGIApp = EventSizing(starlette_app)
    if telemetry is not None:
        # Inside the guard: a scrape passes the same Host, Origin and token checks as a call.
        from skill_mcp.surfaces.http.metrics import ActiveRequests, MetricsRoute

        inner_app = ActiveRequests(inner_app, telemetry)
        if metrics_path is not None:
            inner_app = MetricsRoute(inner_app, metrics_path, telemetry)
    # The guard is outermost: what it counts and answers at shutdown is what EventSizing sends.
    guard = GuardMiddleware(inner_app, policy)
    return HttpApp(asgi=guard, guard=guard, stop_hooks=tuple(stop_hooks))


async def _run_stop_hooks(hooks: Iterable[Callable[[], Any]]) -> None:
    for hook in hooks:
        try:
            result = hook()
            if inspect.isawaitable(result):
                await result
        except Exception:
            # One failing hook must not keep the others (or the exit) from happening.
            logger.exception("a stop hook failed", extra={"event": "http-stop-hook-failed"})


async def _bounded_idle(guard: GuardMiddleware, seconds: float, hurry: Callable[[], bool]) -> bool:
    """Wait until no call is in flight, at most ``seconds``; stop waiting as soon as ``hurry()``
    (a second Ctrl-C). True when idle."""
    deadline = asyncio.get_running_loop().time() + seconds
    while guard.in_flight and not hurry():
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return False
        try:
            await asyncio.wait_for(guard.wait_idle(), timeout=min(left, 0.25))
        except TimeoutError:
            continue
    return not guard.in_flight


INTERRUPTED_EXIT = 130


def _bind(host: str, port: int) -> socket.socket:
    """Bind before uvicorn starts so the actual port (``0`` = any) is known and logged."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY on accepted sockets only then,
    # and without it every answer on a reused connection waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.set_inheritable(False)
    except OSError:
        sock.close()
        raise
    return sock


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, whose shutdown first drains the calls in flight (bounded)."""

    def __init__(self, config: uvicorn.Config, app: HttpApp, drain_seconds: float, cancel_seconds: float) -> None:
        super().__init__(config)
        self.http_app = app
        self.drain_seconds = drain_seconds
        self.cancel_seconds = cancel_seconds

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn re-raises the captured signal after its shutdown, so the process would die by
        # SIGTERM even after a clean drain; a clean drain exits 0 instead.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def _hurry(self) -> bool:
        return bool(self.force_exit)  # a second Ctrl-C: stop waiting

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # The listener stays open through the drain: a call waiting on its confirmation gets the
        # answer as a new POST, possibly on a new connection. The guard answers anything that
        # would start new work with 503.
        guard = self.http_app.guard
        guard.start_draining()
        pending = guard.in_flight
        drained = await _bounded_idle(guard, self.drain_seconds, self._hurry)
        if not drained:
            # Calls still running past the bound: stop their scripts so the calls return (and
            # are answered) instead of being cut off; then give the answers a moment.
            answered = False
            if self.http_app.stop_hooks:
                await _run_stop_hooks(self.http_app.stop_hooks)
                answered = await _bounded_idle(guard, self.cancel_seconds, self._hurry)
            if not answered:
                # Still running: stop streaming those calls and answer each with a JSON-RPC error
                # (reason http-draining). Their handlers end with the lifespan below, where the
                # spawner kills any script still running with its process group.
                guard.cut_in_flight()
                await _bounded_idle(guard, self.cancel_seconds, self._hurry)
        logger.info(
            "http drain finished",
            extra={"event": "http-drained", "inFlightAtSignal": pending, "drained": drained, "left": guard.in_flight},
        )
        # Now, and not at the signal, let sse-starlette end the streams that are left.
        AppStatus.should_exit = True
        # uvicorn then closes what is left (notification streams) and ends the lifespan, which
        # cancels every session task; a script still running is killed with its group.
        await super().shutdown(sockets)


def _make_uvicorn_server(
    app: HttpApp, drain_seconds: float, cancel_seconds: float, gate: ConnectionGate
) -> _DrainingServer:
    # sse-starlette ends every SSE response the moment uvicorn sees SIGTERM, which would cut the
    # calls in flight (their answers travel on SSE) before the drain. Take that decision back:
    # the streams end after the drain (above). Process-wide, like the signal itself.
    AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]
    config = uvicorn.Config(
        app.asgi,
        lifespan="on",
        # uvicorn's default log config writes access lines to stdout; logs belong on stderr.
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=max(math.ceil(cancel_seconds), 1),
        # uvicorn's own limit_concurrency counts open connections, idle ones included, so idle
        # sockets that cost an attacker nothing made it answer 503 to everyone. The gated
        # protocol counts only requests in flight, caps connections by evicting the oldest
        # waiting one, and closes a connection whose request head is late (surfaces.http.conn).
        http=cast("type[asyncio.Protocol]", functools.partial(GatedH11Protocol, shedding=Shedding(gate))),
        h11_max_incomplete_event_size=gate.limits.max_head_bytes,
        # An idle keep-alive connection is closed after this; it holds no call.
        timeout_keep_alive=gate.limits.keep_alive_s,
        # No WebSocket surface exists (the guard refuses the scope); without a WebSocket
        # protocol an upgrade request stays a plain request on this connection.
        ws="none",
        server_header=False,
    )
    return _DrainingServer(config, app, drain_seconds, cancel_seconds)


@dataclass(frozen=True, slots=True)
class Served:
    """What the composition root hands a transport: the MCP server, the hooks that stop its
    running work (the drain's step 3), and the tasks that run beside it (the ``--watch`` reloader)."""

    server: Any
    stop_hooks: tuple[Callable[[], Any], ...] = ()
    background: tuple[Callable[[], Coroutine[Any, Any, None]], ...] = ()
    telemetry: Any = None  # skill_mcp.telemetry.Telemetry when any export is configured


def run_http(
    settings: Settings,
    host: str,
    port: int,
    token: str | None,
    no_auth: bool,
    *,
    served: Served,
    allowed_hosts: Iterable[str] = (),
    drain_seconds: float = DRAIN_SECONDS,
    cancel_seconds: float = CANCEL_SECONDS,
    metrics: str | None = None,
) -> int:
    """Serve ``served`` until SIGTERM/SIGINT. Raises ``SkillMcpError`` (``http-*`` reasons)
    before binding when the exposure is unsafe; returns 0 after a clean shutdown.

    The server and its parts are built by the composition root (``skill_mcp.server.serve_http``);
    this module only exposes them.
    """
    from skill_mcp.logs import configure_logging

    configure_logging(settings.log_level)
    from skill_mcp.surfaces.http.metrics import decide_metrics

    policy = decide_exposure(host, port, token, no_auth, allowed_hosts)
    plan = decide_metrics(metrics, policy, MCP_PATH)
    if not policy.authenticated:
        logger.warning(
            "SERVING WITHOUT AUTHENTICATION (--no-auth): any local process and any local user can call "
            "this server, including skill_run",
            extra={"event": "http-no-auth", **describe(policy)},
        )
    telemetry = served.telemetry
    app = build_http_app(
        served.server,
        policy,
        stop_hooks=served.stop_hooks,
        background=served.background,
        telemetry=telemetry,
        metrics_path=plan.path if plan else None,
    )
    listener = _metrics_listener(plan, telemetry)
    sock = _bind(policy.host, policy.port)
    bound_port = sock.getsockname()[1]
    url = f"http://{_url_host(policy.host)}:{bound_port}{MCP_PATH}"
    # The URL is in the message itself (not only in the structured fields) so any log format
    # shows it; the test harness reads it to learn the port when binding port 0. Info, not
    # warning: listening is the normal outcome (SKILL_MCP_LOG=warning hides it, as it should).
    logger.info(
        "http listening on %s",
        url,
        extra={"event": "http-listening", **describe(policy), "port": bound_port, "url": url},
    )
    gate = ConnectionGate(DEFAULT_LIMITS)
    uv = _make_uvicorn_server(app, drain_seconds, cancel_seconds, gate)
    if telemetry is not None:
        # The gate's own count: every connection it admitted and has not yet forgotten.
        telemetry.watch_connections(lambda: gate.total)
    try:
        uv.run(sockets=[sock])
    finally:
        sock.close()
        if listener is not None:
            listener.close()
    logger.info("http stopped", extra={"event": "http-stopped"})
    # Ctrl-C is an interruption (exit 130, as a shell reports it); SIGTERM is the orderly stop
    # that docker, systemd and Kubernetes send, and a clean drain after it is success.
    return INTERRUPTED_EXIT if signal.SIGINT in getattr(uv, "_captured_signals", ()) else 0


def _metrics_listener(plan: Any, telemetry: Any) -> Any:
    """The scrape endpoint's own listener when ``--metrics HOST:PORT`` asked for one."""
    if plan is None or plan.host is None or telemetry is None:
        return None
    from skill_mcp.surfaces.http.metrics import MetricsListener

    listener = MetricsListener(plan, telemetry)
    listener.start()
    url = f"http://{_url_host(plan.host)}:{listener.port}/metrics"
    logger.warning("metrics listening on %s", url, extra={"event": "metrics-listening", "url": url})
    return listener


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
