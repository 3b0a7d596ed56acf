"""The edge of the HTTP transport: who may reach the server, and from where.

Two decisions live here, both made before a request reaches the SDK's session manager, so a
refused request never opens a session:

* ``decide_exposure`` - at start-up, from the bind address, the token and ``--no-auth``:
  a token is required; serving without one is allowed only on a loopback address and only
  when asked for explicitly. Wildcard binds must name the host names clients will use,
  because DNS-rebinding protection needs a closed list of acceptable ``Host`` values.
* ``GuardMiddleware`` - per request: the ``Host`` (and ``Origin``, when sent) must be one of
  the allowed names (421 / 403 otherwise), then the bearer token must match (401). The
  token is compared as a SHA-256 digest with ``hmac.compare_digest``, so the comparison
  takes the same time whatever the presented value and its length.

The token is a static bearer token, not OAuth. A 401 therefore says ``Bearer`` and nothing
more (no ``resource_metadata`` pointer), and every ``/.well-known/`` path answers 404 with or
without the token: MCP clients probe ``/.well-known/oauth-protected-resource`` and
``/.well-known/oauth-authorization-server`` on a 401 (some even after a good token), and a
401 there reads as "OAuth is configured but you are not logged in", so they start an
interactive OAuth flow instead of reporting a wrong token. A 404 says there is none.

The middleware also counts requests in flight so a SIGTERM can drain them (see
``surfaces.http.transport``); while draining it refuses anything that would open new work (503).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.http.drain import BODY_PEEK_LIMIT, ResponseWatch, answer_stopped, buffered, parse_request

logger = logging.getLogger("skill_mcp.http")

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
# A token is a shared secret typed into client configurations; below this it is guessable
# by an online attacker long before anyone notices.
MIN_TOKEN_CHARS = 16
MCP_SESSION_HEADER = b"mcp-session-id"
WELL_KNOWN_PREFIX = "/.well-known/"
STREAMS_NOT_CALLS = frozenset({"subscriptions/listen"})


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port). IPv6 literals are written ``[::1]:8080``.

    The returned host is bare (``::1``), ready for ``socket.bind``.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise SkillMcpError(Refusal.HTTP_ADDRESS_INVALID, f"expected HOST:PORT, got {text!r}", {"address": text})
    port = int(port_text)
    if port > 65535:
        raise SkillMcpError(Refusal.HTTP_ADDRESS_INVALID, f"port out of range in {text!r}", {"address": text})
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise SkillMcpError(
                Refusal.HTTP_ADDRESS_INVALID, f"not an IPv6 address in {text!r}", {"address": text}
            ) from None
    elif ":" in host:
        raise SkillMcpError(
            Refusal.HTTP_ADDRESS_INVALID, f"write IPv6 addresses in brackets: [{host}]:{port}", {"address": text}
        )
    return host, port


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals. Other names are never trusted as loopback:
    a name could resolve anywhere."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """The form a ``Host`` header uses for a bind host: IPv6 in brackets, lower case."""
    return f"[{host.lower()}]" if ":" in host else host.lower()


@dataclass(frozen=True, slots=True)
class ExposurePolicy:
    """What ``decide_exposure`` settled. The token itself is never kept, only its digest."""

    host: str
    port: int
    allowed_hosts: frozenset[str]
    token_digest: bytes | None = field(repr=False)

    @property
    def authenticated(self) -> bool:
        return self.token_digest is not None


def _check_token(token: str) -> None:
    if len(token) < MIN_TOKEN_CHARS:
        raise SkillMcpError(
            Refusal.HTTP_TOKEN_WEAK,
            f"the HTTP bearer token must be at least {MIN_TOKEN_CHARS} characters",
            {"minChars": MIN_TOKEN_CHARS},
        )
    if not all(0x21 <= ord(c) <= 0x7E for c in token):
        raise SkillMcpError(
            Refusal.HTTP_TOKEN_WEAK, "the HTTP bearer token must be visible ASCII (no spaces or control characters)"
        )


def decide_exposure(
    host: str, port: int, token: str | None, no_auth: bool, allowed_hosts: Iterable[str] = ()
) -> ExposurePolicy:
    """Refuse every unsafe combination; return the policy the middleware enforces.

    ``allowed_hosts`` are extra ``Host`` names (``mcp.example.com``) a reverse proxy forwards.
    """
    if token is not None and no_auth:
        raise SkillMcpError(
            Refusal.HTTP_AUTH_CONFLICT,
            "--no-auth was given together with a token (MCP_HTTP_TOKEN or --token-file); choose one",
        )
    if token is None and not no_auth:
        raise SkillMcpError(
            Refusal.HTTP_AUTH_REQUIRED,
            "serving over HTTP needs a bearer token: set MCP_HTTP_TOKEN or pass --token-file "
            "(or --no-auth, on a loopback address only)",
        )
    if no_auth and not is_loopback(host):
        raise SkillMcpError(
            Refusal.HTTP_NO_AUTH_REMOTE,
            f"--no-auth is allowed only on a loopback address, not {host!r}",
            {"host": host},
        )
    if token is not None:
        _check_token(token)
    names = accepted_names(host, allowed_hosts)
    if not names:
        raise SkillMcpError(
            Refusal.HTTP_ALLOWED_HOSTS_REQUIRED,
            f"binding {host!r} listens on every interface: name the host names clients "
            "use (--allowed-host) so DNS-rebinding protection has a list to check",
        )
    digest = hashlib.sha256(token.encode("ascii")).digest() if token is not None else None
    return ExposurePolicy(host=host, port=port, allowed_hosts=names, token_digest=digest)


def accepted_names(host: str, extra: Iterable[str]) -> frozenset[str]:
    """The ``Host`` names a listener bound on ``host`` accepts (the MCP port and ``--metrics
    HOST:PORT`` alike): the loopback names on loopback, else the bind address itself, and the
    ``extra`` names (``--allowed-host``), lower case. Empty only for a wildcard bind with no
    extra name, which each caller refuses: DNS-rebinding protection needs a closed list."""
    names = {h.strip().lower() for h in extra if h.strip()}
    if is_loopback(host):
        names.update(LOOPBACK_NAMES)
    elif not is_wildcard(host):
        names.add(_host_name(host))
    return frozenset(names)


def host_refused(values: Sequence[str], allowed: frozenset[str]) -> str | None:
    """Why a request's ``Host`` headers are refused (421), or None: exactly one, naming an allowed
    host. Two are refused whatever they say, since a layer behind could read the other one."""
    if len(values) > 1:
        return "more than one Host header"
    if not values or not host_allowed(values[0], allowed):
        return "Host not allowed"
    return None


def host_allowed(value: str | None, allowed: frozenset[str]) -> bool:
    """``Host`` header (``name`` or ``name:port``) against the allowed names, any port."""
    if not value:
        return False
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name += "]"
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return False
    else:
        name, sep, port = value.partition(":")
        if sep and not port.isdigit():
            return False
    return name in allowed


def origin_allowed(value: str | None, allowed: frozenset[str]) -> bool:
    """An absent ``Origin`` is a non-browser client; a present one must name an allowed host."""
    if value is None:
        return True
    scheme, sep, rest = value.strip().partition("://")
    if not sep or scheme.lower() not in ("http", "https") or "/" in rest:
        return False
    return host_allowed(rest, allowed)


def bearer_matches(header: str | None, token_digest: bytes) -> bool:
    if header is None:
        return False
    scheme, _, presented = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    presented_digest = hashlib.sha256(presented.strip().encode("utf-8", "surrogateescape")).digest()
    return hmac.compare_digest(presented_digest, token_digest)


def _refusal_body(reason: Refusal, message: str) -> bytes:
    # JSON-RPC shaped, id null, like the SDK's own transport-level refusals, so MCP clients
    # surface the message; ``data.reason`` is the stable part.
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": message, "data": {"reason": str(reason)}},
    }
    return json.dumps(body).encode()


async def _refuse(
    send: Send, status: int, reason: Refusal, message: str, extra_headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    body = _refusal_body(reason, message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    """ASGI middleware in front of the whole app: Host/Origin, bearer token, drain accounting."""

    def __init__(self, app: ASGIApp, policy: ExposurePolicy) -> None:
        self.app = app
        self.policy = policy
        self.in_flight = 0
        self.draining = False
        self._idle = anyio.Event()
        self._idle.set()
        self._scopes: set[anyio.CancelScope] = set()

    def start_draining(self) -> None:
        self.draining = True

    async def wait_idle(self) -> None:
        """Return once no request is in flight (the caller bounds the wait)."""
        while self.in_flight:
            await self._idle.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            # No WebSocket (or other) surface exists; refuse it here rather than trust every
            # layer behind to do so without the checks below.
            await send({"type": "websocket.close", "code": 1008})
            return
        headers: dict[bytes, bytes] = {}
        repeated: set[bytes] = set()
        for key, value in scope["headers"]:
            name = key.lower()
            if name in headers:
                repeated.add(name)
            headers.setdefault(name, value)
        hosts = [value.decode("latin-1") for key, value in scope["headers"] if key.lower() == b"host"]
        refusal = self._check_host(hosts) or _repeated(repeated) or self._check_origin(headers)
        if refusal is None and str(scope.get("path", "")).startswith(WELL_KNOWN_PREFIX):
            # No OAuth metadata exists (see the module docstring); answered before the token
            # check so a client's discovery probe learns that, token or not.
            await _not_found(send)
            return
        refusal = refusal or self._check_token(headers)
        if refusal is not None:
            status, reason, message, extra = refusal
            logger.warning(
                "http request refused",
                extra={"event": "http-refused", "reason": str(reason), "status": status, "path": scope.get("path")},
            )
            await _refuse(send, status, reason, message, extra)
            return
        # Host names are case-insensitive (RFC 9110) but the SDK's own check behind this one
        # compares them exactly: hand it the accepted values in lower case.
        scope = {
            **scope,
            "headers": [(k, v.lower() if k.lower() in (b"host", b"origin") else v) for k, v in scope["headers"]],
        }
        if scope.get("method") == "POST":
            # Only POSTs carry calls; a GET is a long-lived notification stream that would
            # otherwise hold every drain to its full bound.
            await self._tracked(scope, receive, send, headers)
        else:
            await self.app(scope, receive, send)

    def _check_host(self, hosts: list[str]) -> tuple[int, Refusal, str, list[tuple[bytes, bytes]]] | None:
        why = host_refused(hosts, self.policy.allowed_hosts)
        return (421, Refusal.HTTP_HOST_REFUSED, why, []) if why is not None else None

    def _check_origin(self, headers: dict[bytes, bytes]) -> tuple[int, Refusal, str, list[tuple[bytes, bytes]]] | None:
        if not origin_allowed(_latin1(headers.get(b"origin")), self.policy.allowed_hosts):
            return 403, Refusal.HTTP_ORIGIN_REFUSED, "Origin not allowed", []
        return None

    def _check_token(self, headers: dict[bytes, bytes]) -> tuple[int, Refusal, str, list[tuple[bytes, bytes]]] | None:
        digest = self.policy.token_digest
        if digest is not None and not bearer_matches(_latin1(headers.get(b"authorization")), digest):
            return (
                401,
                Refusal.HTTP_UNAUTHORIZED,
                "Unauthorized: a valid bearer token is required",
                [(b"www-authenticate", b'Bearer realm="skill-mcp"')],
            )
        # While draining, requests of an existing handshake-era session still pass: they may
        # answer a question an in-flight call is waiting on (elicitation). Anything else
        # would start new work after SIGTERM.
        if self.draining and MCP_SESSION_HEADER not in headers:
            return (
                503,
                Refusal.HTTP_DRAINING,
                "the server is shutting down",
                [(b"retry-after", b"5"), (b"connection", b"close")],
            )
        return None

    def cut_in_flight(self) -> None:
        """Stop streaming every call still in flight; each is then answered with an error."""
        for scope in list(self._scopes):
            scope.cancel()

    async def _tracked(self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]) -> None:
        declared = headers.get(b"content-length", b"")
        request_id: str | int | None = None
        if not (declared.isdigit() and int(declared) > BODY_PEEK_LIMIT):  # else the SDK answers 413
            body, receive = await buffered(receive, BODY_PEEK_LIMIT)
            request_id, method = parse_request(body)
            if method in STREAMS_NOT_CALLS:
                # A 2026-07-28 notification stream is a POST that stays open; it carries no
                # call, so it must not hold the drain. It ends with the others after it.
                await self.app(scope, receive, send)
                return
        response = ResponseWatch()

        async def watched_send(message: Message) -> None:
            response.observe(message)
            await send(message)

        self.in_flight += 1
        self._idle = anyio.Event() if self.in_flight == 1 else self._idle
        try:
            with anyio.CancelScope() as cancel_scope:
                self._scopes.add(cancel_scope)
                try:
                    await self.app(scope, receive, watched_send)
                finally:
                    self._scopes.discard(cancel_scope)
            if cancel_scope.cancelled_caught and request_id is not None and not response.complete:
                await answer_stopped(send, response, request_id)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()


async def _not_found(send: Send) -> None:
    body = b"Not Found"
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _repeated(names: set[bytes]) -> tuple[int, Refusal, str, list[tuple[bytes, bytes]]] | None:
    """Two Origin or Authorization headers (Host: ``host_refused``): layers behind could read the other one."""
    if b"origin" in names:
        return 403, Refusal.HTTP_ORIGIN_REFUSED, "more than one Origin header", []
    if b"authorization" in names:
        return (
            401,
            Refusal.HTTP_UNAUTHORIZED,
            "more than one Authorization header",
            [(b"www-authenticate", b'Bearer realm="skill-mcp"')],
        )
    return None


def _latin1(value: bytes | None) -> str | None:
    return value.decode("latin-1") if value is not None else None


def describe(policy: ExposurePolicy) -> dict[str, Any]:
    """Log-safe summary (never the token)."""
    return {
        "host": policy.host,
        "port": policy.port,
        "authenticated": policy.authenticated,
        "allowedHosts": sorted(policy.allowed_hosts),
    }
