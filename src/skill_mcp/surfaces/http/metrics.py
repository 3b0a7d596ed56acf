"""``serve --http --metrics``: the Prometheus scrape endpoint, and the HTTP request gauge.

Off by default. Two places it may be, decided before anything binds (``decide_metrics``):

* ``--metrics /metrics`` (a path): on the MCP port, behind the same guard as ``/mcp`` (Host,
  Origin, bearer token). Refused on a server without a token (``http-metrics-unauthenticated``):
  the MCP port is never opened to an unauthenticated reader. This is the appliance's form, whose
  server uid may answer only on its HTTP port.
* ``--metrics HOST:PORT``: a listener of its own, with the same Host check as the MCP port (the
  loopback names on loopback, the bind address itself, ``--allowed-host`` names; a wildcard bind
  needs ``--allowed-host``), no token, answering only ``GET /metrics``. What it shows is counts,
  durations, tool and skill names and refusal reasons: bind it where only the scraper reaches.
"""

from __future__ import annotations

import http.server
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.http.guard import (
    LOOPBACK_NAMES,
    ExposurePolicy,
    accepted_names,
    host_refused,
    parse_host_port,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.telemetry import Telemetry

logger = logging.getLogger("skill_mcp.http")

SCRAPE_PATH = "/metrics"
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/")


@dataclass(frozen=True, slots=True)
class MetricsPlan:
    """Where the scrape endpoint is: ``path`` on the MCP port, or its own listener."""

    path: str | None = None
    host: str | None = None
    port: int | None = None
    allowed_hosts: frozenset[str] = frozenset()


def decide_metrics(spec: str | None, policy: ExposurePolicy, mcp_path: str) -> MetricsPlan | None:
    """``--metrics`` (or ``SKILL_MCP_METRICS``) checked against the MCP port's policy."""
    if spec is None or not spec.strip():
        return None
    spec = spec.strip()
    if spec.startswith("/"):
        if not set(spec) <= _PATH_CHARS or spec.rstrip("/") == mcp_path or "//" in spec:
            raise SkillMcpError(
                Refusal.HTTP_ADDRESS_INVALID,
                f"--metrics {spec!r}: a plain path other than {mcp_path}",
                {"metrics": spec},
            )
        if not policy.authenticated:
            raise SkillMcpError(
                Refusal.HTTP_METRICS_UNAUTHENTICATED,
                f"--metrics {spec} would put the scrape endpoint on the MCP port of a server "
                "without a token; give it its own HOST:PORT, or serve with a token",
                {"metrics": spec},
            )
        return MetricsPlan(path=spec)
    host, port = parse_host_port(spec)
    # The MCP port's names but its loopback ones, which only a loopback listener accepts.
    names = accepted_names(host, [h for h in policy.allowed_hosts if h not in LOOPBACK_NAMES])
    if not names:
        raise SkillMcpError(
            Refusal.HTTP_ALLOWED_HOSTS_REQUIRED,
            f"--metrics {spec} listens on every interface: name the host names scrapers use "
            "(--allowed-host) so the Host check has a list",
            {"metrics": spec},
        )
    if port == policy.port and port != 0:
        raise SkillMcpError(
            Refusal.HTTP_ADDRESS_INVALID,
            f"--metrics {spec}: the MCP port; use a path (--metrics /metrics) to share it",
            {"metrics": spec},
        )
    return MetricsPlan(host=host, port=port, allowed_hosts=names)


class MetricsRoute:
    """ASGI: ``GET <path>`` answers the scrape; everything else goes on to the MCP app.

    Sits inside the guard, so a scrape passes the same Host, Origin and token checks as a call.
    """

    def __init__(self, app: ASGIApp, path: str, telemetry: Telemetry) -> None:
        self.app = app
        self.path = path
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await _answer(send, 405, b"GET only\n", "text/plain; charset=utf-8", [(b"allow", b"GET, HEAD")])
            return
        body, content_type = self.telemetry.prometheus_text()
        await _answer(send, 200, body if scope.get("method") == "GET" else b"", content_type)


SESSION_HEADER = b"mcp-session-id"
MAX_SESSIONS_TIMED = 10_000
SESSION_ATTRS = {"network.transport": "tcp", "network.protocol.name": "http"}


class ActiveRequests:
    """ASGI: ``http.server.active_requests`` up while a request is served (notification streams
    included: they hold a connection), and ``mcp.server.session.duration`` of handshake-era
    sessions: from the answer that hands out a new ``Mcp-Session-Id`` to the ``DELETE`` that
    ends it, the 404 that says it is gone, or the server's stop. (2026-07-28 has no sessions.)
    At most ``MAX_SESSIONS_TIMED`` are timed at once; more are served, not timed."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry
        self._sessions: dict[bytes, float] = {}

    def _ended(self, sid: bytes) -> None:
        started = self._sessions.pop(sid, None)
        if started is not None:
            self.telemetry.session_ended(time.monotonic() - started, SESSION_ATTRS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._lifespan_send(send))
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "_OTHER")
        asked = dict(scope.get("headers") or ()).get(SESSION_HEADER)

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message.get("status", 0)
                given = dict(message.get("headers") or ()).get(SESSION_HEADER)
                if asked is None and given is not None and status < 300 and len(self._sessions) < MAX_SESSIONS_TIMED:
                    self._sessions.setdefault(given, time.monotonic())
                elif asked is not None and (status == 404 or (method == "DELETE" and status < 300)):
                    self._ended(asked)
            await send(message)

        attrs = {"http.request.method": method}
        self.telemetry.active_requests.add(1, attrs)
        try:
            await self.app(scope, receive, watched)
        finally:
            self.telemetry.active_requests.add(-1, attrs)

    def _lifespan_send(self, send: Send) -> Send:
        async def lifespan_send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                for sid in list(self._sessions):
                    self._ended(sid)
            await send(message)

        return lifespan_send


async def _answer(
    send: Send, status: int, body: bytes, content_type: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class MetricsListener:
    """The scrape endpoint on its own address: a small threaded stdlib server, ``GET /metrics``."""

    def __init__(self, plan: MetricsPlan, telemetry: Telemetry) -> None:
        assert plan.host is not None and plan.port is not None
        allowed = plan.allowed_hosts

        class Handler(http.server.BaseHTTPRequestHandler):
            server_version = "skill-mcp"
            sys_version = ""

            def log_message(self, format: str, *args: Any) -> None:
                return None  # its default writes every request to stderr unstructured

            def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self) -> None:
                why = host_refused(self.headers.get_all("Host") or [], allowed)
                if why is not None:
                    logger.warning(
                        "metrics request refused",
                        extra={
                            "event": "http-refused",
                            "reason": str(Refusal.HTTP_HOST_REFUSED),
                            "status": 421,
                            "path": SCRAPE_PATH,
                        },
                    )
                    self._send(421, f"{why}\n".encode())
                    return
                if self.path.split("?", 1)[0] != SCRAPE_PATH:
                    self._send(404, b"not found\n")
                    return
                body, content_type = telemetry.prometheus_text()
                self._send(200, body, content_type)

            do_HEAD = do_GET

        family_server = _V6Server if ":" in plan.host else http.server.ThreadingHTTPServer
        self._server = family_server((plan.host, plan.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.5}, name="skill-mcp-metrics", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class _V6Server(http.server.ThreadingHTTPServer):
    import socket as _socket

    address_family = _socket.AF_INET6
