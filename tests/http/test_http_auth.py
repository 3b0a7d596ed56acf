"""The HTTP transport's edge, end to end: a real server subprocess, real sockets, the SDK's client.

Each denial has its positive control beside it. "No session" is observed two ways: the refusal
carries no ``Mcp-Session-Id``, and the SDK's session manager never logs a session creation for it.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.helpers import wait_until
from tests.http.harness import HttpServer, child_env, http_client, running_http_server, server_argv

TOKEN = "conformance-token-0123456789abcdef"
CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"
SESSION_CREATED = "Created new transport with session ID"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    with running_http_server([CORPUS], token=TOKEN) as srv:
        yield srv


def _post(url: str, headers: dict[str, str], body: dict[str, object] = INIT) -> httpx2.Response:
    with httpx2.Client(timeout=20) as http:
        return http.post(url, headers={**ACCEPT, **headers}, content=json.dumps(body))


def _modern_post(url: str, headers: dict[str, str]) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
            }
        },
    }
    return _post(url, {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list", **headers}, body)


def _sessions_created(srv: HttpServer) -> int:
    return srv.stderr.count(SESSION_CREATED)


@pytest.mark.slow
@pytest.mark.parametrize(
    "auth",
    [
        None,
        "Bearer wrong-token-0123456789abcdef",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}0",
        f"Basic {TOKEN}",
        TOKEN,
        "Bearer",
    ],
    ids=["missing", "wrong", "prefix", "extended", "basic-scheme", "no-scheme", "empty"],
)
def test_request_without_the_right_token_gets_401_and_no_session(server: HttpServer, auth: str | None) -> None:
    before = _sessions_created(server)
    headers = {"Authorization": auth} if auth is not None else {}
    response = _post(server.url, headers)
    assert response.status_code == 401
    assert "mcp-session-id" not in response.headers
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["data"]["reason"] == "http-unauthorized"
    # Positive control on the same server: the right token opens a session (and it is logged).
    ok = _post(server.url, {"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert ok.headers.get("mcp-session-id")
    wait_until(lambda: _sessions_created(server) == before + 1, "the server to log the new session")


def test_modern_era_request_without_token_gets_401(server: HttpServer) -> None:
    assert _modern_post(server.url, {}).status_code == 401
    ok = _modern_post(server.url, {"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert "skill_list" in ok.text


def test_every_path_needs_the_token(server: HttpServer) -> None:
    base = server.url.rsplit("/", 1)[0]
    with httpx2.Client(timeout=20) as http:
        assert http.get(f"{base}/anything").status_code == 401
        assert http.get(f"{base}/anything", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404


def test_foreign_host_is_refused_before_auth(server: HttpServer) -> None:
    refused = _post(server.url, {"Host": "evil.example.com", "Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 421
    assert refused.json()["error"]["data"]["reason"] == "http-host-refused"
    assert "mcp-session-id" not in refused.headers
    ok = _post(server.url, {"Host": f"localhost:{server.port}", "Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200


def test_foreign_origin_is_refused(server: HttpServer) -> None:
    refused = _post(server.url, {"Origin": "http://evil.example.com", "Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 403
    assert refused.json()["error"]["data"]["reason"] == "http-origin-refused"
    ok = _post(server.url, {"Origin": f"http://127.0.0.1:{server.port}", "Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_sdk_client_with_the_token_reads_a_skill(server: HttpServer, mode: str) -> None:
    async def main() -> tuple[list[str], str]:
        async with http_client(server.url, token=TOKEN, mode=mode) as client:
            tools = await client.list_tools()
            read = await client.read_resource("skill://alpha-tools/SKILL.md")
            return [t.name for t in tools.tools], read.contents[0].text

    names, text = anyio.run(main)
    assert "skill_load" in names
    assert "name: alpha-tools" in text


def test_sdk_client_without_the_token_cannot_connect(server: HttpServer) -> None:
    async def main() -> None:
        async with http_client(server.url, token="not-the-token-0123456789", mode="legacy") as client:
            await client.list_tools()

    with pytest.raises(Exception) as err:
        anyio.run(main)
    assert "401" in repr(err.value) or "Unauthorized" in repr(err.value)


def _start_refused(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*server_argv([CORPUS], address=args[0]), *args[1:]]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env=child_env(env), stdin=subprocess.DEVNULL
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("address", "flags", "env", "reason"),
    [
        ("127.0.0.1:0", [], {}, "http-auth-required"),
        ("0.0.0.0:0", ["--no-auth"], {}, "http-no-auth-remote"),
        ("127.0.0.1:0", ["--no-auth"], {"MCP_HTTP_TOKEN": TOKEN}, "http-auth-conflict"),
        ("127.0.0.1:0", [], {"MCP_HTTP_TOKEN": "short"}, "http-token-weak"),
    ],
)
def test_unsafe_start_is_refused_and_nothing_listens(
    address: str, flags: list[str], env: dict[str, str], reason: str
) -> None:
    done = _start_refused(address, *flags, env=env)
    assert done.returncode == 3, done.stderr  # skill-mcp's "could not start"
    assert "http listening" not in done.stderr
    assert "error" in done.stderr


@pytest.mark.slow
def test_no_auth_on_loopback_serves_and_says_so_loudly() -> None:
    with running_http_server([CORPUS], no_auth=True) as srv:
        assert _post(srv.url, {}).status_code == 200
        assert "SERVING WITHOUT AUTHENTICATION" in srv.stderr


@pytest.mark.slow
def test_token_file_is_the_token(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}\n", encoding="utf-8")
    with running_http_server([CORPUS], token_file=token_file) as srv:
        assert _post(srv.url, {}).status_code == 401
        assert _post(srv.url, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200


@pytest.mark.slow
@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 on this machine")
def test_ipv6_loopback_serves_and_checks_the_bracketed_host() -> None:
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("::1 is not configured here")
    with running_http_server([CORPUS], token=TOKEN, address="[::1]:0") as srv:
        assert srv.url.startswith("http://[::1]:")
        assert _post(srv.url, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert _post(srv.url, {"Authorization": f"Bearer {TOKEN}", "Host": "evil.example.com"}).status_code == 421


def test_an_oversized_body_is_refused_without_a_session(server: HttpServer) -> None:
    before = _sessions_created(server)
    big = {**INIT, "params": {**INIT["params"], "pad": "x" * (5 * 1024 * 1024)}}  # type: ignore[dict-item]
    response = _post(server.url, {"Authorization": f"Bearer {TOKEN}"}, big)
    assert response.status_code == 413
    assert "mcp-session-id" not in response.headers
    # Positive control: the server still serves, and only that one session is new.
    assert _post(server.url, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    wait_until(lambda: _sessions_created(server) == before + 1, "the server to log the new session")


@pytest.mark.slow
def test_allowed_host_admits_the_proxy_name_and_nothing_else() -> None:
    with running_http_server([CORPUS], token=TOKEN, allowed_hosts=["mcp.example.com"]) as srv:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert _post(srv.url, {**auth, "Host": "mcp.example.com"}).status_code == 200
        assert (
            _post(srv.url, {**auth, "Host": "MCP.example.com:443", "Origin": "https://Mcp.Example.com"}).status_code
            == 200
        )
        assert _post(srv.url, {**auth, "Host": "other.example.com"}).status_code == 421
        assert (
            _post(srv.url, {**auth, "Host": "mcp.example.com", "Origin": "https://evil.example.com"}).status_code == 403
        )


def test_neither_the_token_nor_a_presented_one_is_ever_logged(server: HttpServer) -> None:
    presented = "presented-but-wrong-0123456789"
    assert _post(server.url, {"Authorization": f"Bearer {presented}"}).status_code == 401
    wait_until(lambda: "http-refused" in server.stderr, "the refusal in the log")  # positive control
    assert TOKEN not in server.stderr
    assert presented not in server.stderr
