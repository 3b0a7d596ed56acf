"""A static bearer token is not OAuth, and the server must not look like an OAuth resource.

MCP clients probe ``/.well-known/oauth-protected-resource`` (and the authorization-server
documents) on a 401, some even with a good token. While those paths answered 401 like every
other, a client read "OAuth is configured, you are not logged in" and started an interactive
OAuth flow (the MCP Inspector: "Interactive OAuth requires a TTY"; mcp-use: "Failed to discover
OAuth/OIDC metadata") instead of saying the token was wrong. Driven over raw HTTP against a real
server subprocess, and with the MCP Inspector 2.x CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.http.harness import HttpServer, child_env, running_http_server, server_argv
from tests.verifiers.judges import INSPECTOR, NODE, inspector_or_skip

TOKEN = "no-oauth-token-0123456789abcdef"
WRONG = "wrong-token-0123456789abcdef"
CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"
WELL_KNOWN = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]  # slow: an HTTP server subprocess per case


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    with running_http_server([CORPUS], token=TOKEN) as srv:
        yield srv


def _base(srv: HttpServer) -> str:
    return srv.url.rsplit("/", 1)[0]


@pytest.mark.parametrize("path", WELL_KNOWN)
@pytest.mark.parametrize("auth", [None, WRONG, TOKEN], ids=["no-token", "wrong-token", "right-token"])
def test_well_known_oauth_documents_are_not_found_token_or_not(server: HttpServer, path: str, auth: str | None) -> None:
    headers = {"Authorization": f"Bearer {auth}"} if auth else {}
    with httpx2.Client(timeout=20) as http:
        response = http.get(_base(server) + path, headers=headers)
    assert response.status_code == 404
    assert "www-authenticate" not in response.headers


def test_well_known_from_a_foreign_host_is_still_refused_first(server: HttpServer) -> None:
    with httpx2.Client(timeout=20) as http:
        refused = http.get(_base(server) + WELL_KNOWN[0], headers={"Host": "evil.example.com"})
        ok = http.get(_base(server) + WELL_KNOWN[0])
    assert refused.status_code == 421
    assert ok.status_code == 404  # positive control: the same path from an allowed Host


def test_a_wrong_token_gets_a_plain_bearer_401_without_an_oauth_pointer(server: HttpServer) -> None:
    with httpx2.Client(timeout=20) as http:
        response = http.post(
            server.url, headers={**ACCEPT, "Authorization": f"Bearer {WRONG}"}, content=json.dumps(INIT)
        )
        ok = http.post(server.url, headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"}, content=json.dumps(INIT))
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer")
    assert "resource_metadata" not in challenge
    assert response.json()["error"]["data"]["reason"] == "http-unauthorized"
    assert ok.status_code == 200


def test_other_paths_still_need_the_token(server: HttpServer) -> None:
    with httpx2.Client(timeout=20) as http:
        assert http.get(_base(server) + "/register").status_code == 401
        assert http.get(_base(server) + "/well-known/oauth-protected-resource").status_code == 401


def test_an_empty_token_file_is_named_as_empty(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("\n", encoding="utf-8")
    argv = [*server_argv([CORPUS]), "--token-file", str(token_file)]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env=child_env(), stdin=subprocess.DEVNULL, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "the token file is empty" in done.stderr
    assert "needs a bearer token" not in done.stderr
    assert "http listening" not in done.stderr


def _inspector(url: str, token: str, home: Path) -> subprocess.CompletedProcess[str]:
    # The Inspector installed by `npm ci` in tools/verifiers (.ci/setup.d/node.sh), not an npx
    # download: the version is the lock file's, and a first run does not wait on the registry.
    inspector_or_skip()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "NO_COLOR": "1",
        "MCP_INSPECTOR_SECRET_STORE": "memory",
    }
    # --stored-auth-only is the Inspector's non-interactive mode: without a terminal it never
    # starts OAuth itself, so what it reports is what the server answered.
    argv = [
        str(NODE),
        str(INSPECTOR),
        "--transport",
        "http",
        "--server-url",
        url,
        "--method",
        "tools/list",
        "--stored-auth-only",
        "--header",
        f"Authorization: Bearer {token}",
    ]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=200, env=env, stdin=subprocess.DEVNULL, check=False
    )


def test_the_inspector_cli_reports_a_wrong_token_as_unauthorized_and_lists_with_the_right_one(tmp_path: Path) -> None:
    with running_http_server([CORPUS], token=TOKEN) as srv:
        refused = _inspector(srv.url, WRONG, tmp_path)
        listed = _inspector(srv.url, TOKEN, tmp_path)
    log = srv.stderr  # read once the server has stopped: every line it wrote is in
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "Unauthorized: a valid bearer token is required" in said, said[-2000:]
    assert "TTY" not in said and "OAuth" not in said and "metadata" not in said
    assert listed.returncode == 0, (listed.stdout + listed.stderr)[-2000:]
    assert "skill_list" in listed.stdout
    # Whatever the Inspector probed, no /.well-known/ path was ever answered 401.
    refusals = [json.loads(line) for line in log.splitlines() if '"http-refused"' in line]
    assert not [r for r in refusals if str(r.get("path", "")).startswith("/.well-known/")]
