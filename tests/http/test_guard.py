"""The HTTP edge's pure decisions: address parsing, exposure policy, Host/Origin, bearer match."""

from __future__ import annotations

import hashlib
from collections.abc import MutableMapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.http.guard import (
    LOOPBACK_NAMES,
    accepted_names,
    bearer_matches,
    decide_exposure,
    host_allowed,
    host_refused,
    is_loopback,
    origin_allowed,
    parse_host_port,
)

TOKEN = "s3cret-token-0123456789"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:9000", ("::1", 9000)),
        ("0.0.0.0:443", ("0.0.0.0", 443)),
        ("mcp.example.com:8443", ("mcp.example.com", 8443)),
    ],
)
def test_parse_host_port_accepts(text: str, expected: tuple[str, int]) -> None:
    assert parse_host_port(text) == expected


@pytest.mark.parametrize(
    "text",
    ["8080", ":8080", "127.0.0.1:", "127.0.0.1:x", "::1:8080", "[nothost]:80", "127.0.0.1:70000", "127.0.0.1:-1"],
)
def test_parse_host_port_refuses(text: str) -> None:
    with pytest.raises(SkillMcpError) as err:
        parse_host_port(text)
    assert err.value.reason == Refusal.HTTP_ADDRESS_INVALID


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
        ("localhost.example.com", False),
        ("::", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("host", "token", "no_auth", "allowed", "reason"),
    [
        ("127.0.0.1", None, False, (), Refusal.HTTP_AUTH_REQUIRED),
        ("10.1.2.3", None, False, (), Refusal.HTTP_AUTH_REQUIRED),
        ("10.1.2.3", None, True, (), Refusal.HTTP_NO_AUTH_REMOTE),
        ("0.0.0.0", None, True, ("mcp.example.com",), Refusal.HTTP_NO_AUTH_REMOTE),
        ("::", None, True, (), Refusal.HTTP_NO_AUTH_REMOTE),
        ("127.0.0.1", TOKEN, True, (), Refusal.HTTP_AUTH_CONFLICT),
        ("127.0.0.1", "short", False, (), Refusal.HTTP_TOKEN_WEAK),
        ("127.0.0.1", "has a space in the token", False, (), Refusal.HTTP_TOKEN_WEAK),
        ("0.0.0.0", TOKEN, False, (), Refusal.HTTP_ALLOWED_HOSTS_REQUIRED),
    ],
)
def test_unsafe_exposure_is_refused_before_binding(
    host: str, token: str | None, no_auth: bool, allowed: tuple[str, ...], reason: Refusal
) -> None:
    with pytest.raises(SkillMcpError) as err:
        decide_exposure(host, 0, token, no_auth, allowed)
    assert err.value.reason == reason


def test_no_auth_on_loopback_is_allowed_and_unauthenticated() -> None:
    policy = decide_exposure("127.0.0.1", 0, None, True)
    assert not policy.authenticated
    assert policy.allowed_hosts == frozenset(LOOPBACK_NAMES)


def test_token_policy_keeps_only_a_digest() -> None:
    policy = decide_exposure("10.1.2.3", 8443, TOKEN, False, ("MCP.example.com",))
    assert policy.authenticated
    assert policy.token_digest == hashlib.sha256(TOKEN.encode()).digest()
    assert TOKEN not in repr(policy)
    assert policy.allowed_hosts == {"10.1.2.3", "mcp.example.com"}


def test_wildcard_bind_serves_only_the_named_hosts() -> None:
    policy = decide_exposure("0.0.0.0", 80, TOKEN, False, ("mcp.example.com",))
    assert policy.allowed_hosts == {"mcp.example.com"}


LOOP = frozenset(LOOPBACK_NAMES)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("127.0.0.1:8080", True),
        ("localhost", True),
        ("LocalHost:1", True),
        ("[::1]:80", True),
        ("[::1]", True),
        ("evil.example.com", False),
        ("evil.example.com:8080", False),
        ("127.0.0.1.evil.com:80", False),
        ("localhost:80:80", False),
        ("localhost:abc", False),
        ("[::1]x", False),
        ("[::2]:80", False),
        ("", False),
        (None, False),
        ("127.0.0.1@evil.com", False),
    ],
)
def test_host_header_must_name_an_allowed_host(value: str | None, ok: bool) -> None:
    assert host_allowed(value, LOOP) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (None, True),
        ("http://localhost:3000", True),
        ("https://127.0.0.1", True),
        ("http://[::1]:5", True),
        ("http://evil.example.com", False),
        ("null", False),
        ("file://localhost", False),
        ("http://localhost:3000/path", False),
        ("http://localhost.evil.com", False),
    ],
)
def test_origin_header_when_present_must_name_an_allowed_host(value: str | None, ok: bool) -> None:
    assert origin_allowed(value, LOOP) is ok


DIGEST = hashlib.sha256(TOKEN.encode()).digest()


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        (f"Bearer {TOKEN}", True),
        (f"bearer {TOKEN}", True),
        (f"  Bearer   {TOKEN}  ", True),
        (None, False),
        ("", False),
        ("Bearer", False),
        ("Bearer ", False),
        (f"Basic {TOKEN}", False),
        (f"Bearer {TOKEN[:-1]}", False),
        (f"Bearer {TOKEN}x", False),
        (f"Bearer {TOKEN.upper()}", False),
        (TOKEN, False),
    ],
)
def test_bearer_token_must_match_exactly(header: str | None, ok: bool) -> None:
    assert bearer_matches(header, DIGEST) is ok


@given(st.text(max_size=80))
def test_no_other_presented_token_matches(presented: str) -> None:
    if presented.strip() == TOKEN:
        return
    assert not bearer_matches(f"Bearer {presented}", DIGEST)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"tools/call"}', 7),
        (b'{"jsonrpc":"2.0","id":"a","method":"tools/call"}', "a"),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', None),
        (b'{"jsonrpc":"2.0","id":7,"result":{}}', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"x"}]', None),
        (b"not json", None),
        (b"", None),
        (None, None),
    ],
)
def test_only_a_single_request_has_an_id_to_answer(body: bytes | None, expected: object) -> None:
    from skill_mcp.surfaces.http.drain import request_id_of

    assert request_id_of(body) == expected


def test_a_websocket_scope_is_closed_without_reaching_the_app() -> None:
    import anyio

    from skill_mcp.surfaces.http.guard import GuardMiddleware

    reached: list[str] = []
    sent: list[MutableMapping[str, Any]] = []

    async def app(scope: object, receive: object, send: object) -> None:
        reached.append("app")

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    guard = GuardMiddleware(app, decide_exposure("127.0.0.1", 0, TOKEN, False))
    anyio.run(guard, {"type": "websocket", "headers": [(b"host", b"localhost")]}, receive, send)
    assert reached == [] and sent == [{"type": "websocket.close", "code": 1008}]
    # Positive control: the lifespan passes through.
    anyio.run(guard, {"type": "lifespan"}, receive, send)
    assert reached == ["app"]


@pytest.mark.parametrize(
    ("extra", "status"),
    [
        ([(b"host", b"evil.example.com")], 421),
        ([(b"origin", b"http://localhost"), (b"origin", b"http://evil.example.com")], 403),
        ([(b"authorization", f"Bearer {TOKEN}".encode())], 401),
        ([], 200),  # positive control: one of each passes
    ],
)
def test_a_repeated_host_origin_or_authorization_header_is_refused(
    extra: list[tuple[bytes, bytes]], status: int
) -> None:
    import anyio

    from skill_mcp.surfaces.http.guard import GuardMiddleware

    sent: list[MutableMapping[str, Any]] = []

    async def app(scope: object, receive: object, send: object) -> None:
        sent.append({"type": "http.response.start", "status": 200})

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    guard = GuardMiddleware(app, decide_exposure("127.0.0.1", 0, TOKEN, False))
    headers = [(b"host", b"localhost:1"), (b"authorization", f"Bearer {TOKEN}".encode()), *extra]
    anyio.run(guard, {"type": "http", "method": "GET", "path": "/mcp", "headers": headers}, receive, send)
    assert sent[0]["status"] == status


def test_the_listening_socket_is_tcp_with_nodelay() -> None:
    """asyncio turns on TCP_NODELAY for accepted sockets only when the listener's proto is TCP;
    without it each answer on a kept-alive connection waited ~40 ms for a delayed ACK."""
    import socket

    from skill_mcp.surfaces.http.transport import _bind

    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        client = socket.create_connection(sock.getsockname(), timeout=5)
        accepted, _ = sock.accept()
        with client, accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()


@pytest.mark.parametrize(
    ("hosts", "why"),
    [
        (["localhost:8000"], None),  # positive control: one allowed Host
        (["LOCALHOST"], None),
        ([], "Host not allowed"),
        (["evil.example.com"], "Host not allowed"),
        (["localhost", "localhost"], "more than one Host header"),  # two, even both allowed
    ],
)
def test_one_host_check_for_the_mcp_port_and_the_metrics_listener(hosts: list[str], why: str | None) -> None:
    # The guard and the --metrics listener both call host_refused over accepted_names.
    assert host_refused(hosts, accepted_names("127.0.0.1", ())) == why


def test_accepted_names_per_bind() -> None:
    assert accepted_names("127.0.0.1", ()) == frozenset(LOOPBACK_NAMES)
    assert accepted_names("10.0.0.5", [" MCP.example.com "]) == {"10.0.0.5", "mcp.example.com"}
    assert accepted_names("::", ()) == frozenset()  # a wildcard with no name: each caller refuses it
    assert accepted_names("fe80::1", ()) == {"[fe80::1]"}
