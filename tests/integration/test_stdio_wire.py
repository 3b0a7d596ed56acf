"""The stdio wire itself: unparseable lines answered, stdout pure, logs JSON on stderr."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import RawServer
from tests.serve import serve_argv

pytestmark = pytest.mark.slow  # every case starts a server or a CLI subprocess


def test_a_line_that_is_not_json_gets_32700_and_the_server_keeps_serving(skills_root: Path) -> None:
    srv = RawServer(skills_root)
    try:
        assert srv.initialize()["result"]["serverInfo"]["name"] == "skill-mcp"
        srv.send("this is { not json")
        assert json.loads(srv.read_line()) == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: the line is not valid JSON"},
        }
        srv.send('{"not": "json-rpc"}')
        reply = json.loads(srv.read_line())
        assert reply["id"] is None and reply["error"]["code"] == -32600
        srv.send('{"jsonrpc": "2.0", "id": 41, "method": 7}')
        reply = json.loads(srv.read_line())
        assert reply["id"] == 41 and reply["error"]["code"] == -32600
        srv.send(b"\xff\xfe garbage bytes")
        assert json.loads(srv.read_line())["error"]["code"] == -32700
        # Still serving: a real request after the garbage is answered normally.
        srv.request(2, "tools/list")
        reply = json.loads(srv.read_line())
        assert reply["id"] == 2 and {t["name"] for t in reply["result"]["tools"]} >= {"skill_list"}
        srv.request(3, "no/such/method")
        assert json.loads(srv.read_line())["error"]["code"] == -32601
    finally:
        rest, _ = srv.close()
    assert rest == b""


def test_stdout_carries_only_json_rpc_and_stderr_only_json_log_lines(skills_root: Path) -> None:
    srv = RawServer(skills_root, {"SKILL_MCP_LOG": "debug"})
    lines: list[bytes] = []
    try:
        srv.initialize()
        requests: list[tuple[str, dict[str, Any]]] = [
            ("tools/call", {"name": "skill_list", "arguments": {}}),
            ("tools/call", {"name": "skill_file", "arguments": {"name": "alpha", "paths": ["assets/logo.png", "x"]}}),
            ("tools/call", {"name": "skill_load", "arguments": {"name": "nope"}}),
            ("prompts/get", {"name": "alpha"}),
            ("resources/read", {"uri": "skill://alpha/references/guide.md"}),
            ("resources/read", {"uri": "skill://alpha/missing"}),
            ("skills/list", {}),
        ]
        for rid, (method, params) in enumerate(requests, start=10):
            srv.request(rid, method, params)
            lines.append(srv.read_line())
        srv.send("garbage")
        lines.append(srv.read_line())
    finally:
        rest, err = srv.close()
    lines += rest.splitlines(keepends=True)
    for line in lines:
        assert line.endswith(b"\n")
        msg = json.loads(line)
        assert msg["jsonrpc"] == "2.0" and ("result" in msg or "error" in msg)
    assert [json.loads(x)["id"] for x in lines[:7]] == list(range(10, 17))
    log_lines = [x for x in err.decode().splitlines() if x.strip()]
    assert log_lines, "debug logging produced no stderr lines"
    for log_line in log_lines:
        record = json.loads(log_line)
        assert {"ts", "level", "logger", "msg"} <= set(record)


def test_started_by_hand_on_a_terminal_it_says_what_it_serves_and_how_to_connect(skills_root: Path) -> None:
    controller, terminal = pty.openpty()
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    proc = subprocess.Popen(
        serve_argv([skills_root]),
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "LANG": "C.UTF-8"},
    )
    os.close(terminal)
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        assert ready, "no banner on stderr within 30 s"
        banner = os.read(proc.stderr.fileno(), 65536).decode()
    finally:
        os.close(controller)  # the terminal hangs up: stdin reads EOF and the server exits
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=20)
            raise
    assert "serving 4 skill(s)" in banner and str(skills_root) in banner
    assert "skill-mcp serve" in banner and "MCP client" in banner
    assert out == b""


def test_sigterm_stops_the_server_like_end_of_input(skills_root: Path) -> None:
    srv = RawServer(skills_root)
    srv.initialize()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        code = srv.proc.wait(timeout=20)
    finally:
        rest, err = srv.close()
    assert code == 0 and rest == b""
    messages = [json.loads(line)["msg"] for line in err.decode().splitlines() if line.strip()]
    assert "signal received; stopping" in messages and messages[-1] == "stopped serving over stdio"


def test_a_line_over_16_mib_is_dropped_and_answered_and_serving_goes_on(skills_root: Path) -> None:
    srv = RawServer(skills_root)
    try:
        srv.initialize()
        srv.send(b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"pad": "' + b"x" * (17 * 1024 * 1024))
        reply = json.loads(srv.read_line())
        assert reply["id"] is None and reply["error"]["code"] == -32700
        srv.request(6, "ping")
        assert json.loads(srv.read_line()) == {"jsonrpc": "2.0", "id": 6, "result": {}}
    finally:
        srv.close()


@pytest.mark.parametrize("stdout_kind", ["pipe", "file", "socket"])
def test_every_request_read_before_end_of_input_is_answered(
    skills_root: Path, tmp_path: Path, stdout_kind: str
) -> None:
    """Whatever stdout is (a pipe, a regular file, a socket as inetd would give), every answer lands whole."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "skill_load", "arguments": {"name": "alpha"}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "skills/list"},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "skill://alpha/nope"}},
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "skill_file", "arguments": {"name": "bulk", "paths": ["data/part0.txt"]}},
        },
    ]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n", encoding="utf-8")
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    command = serve_argv([skills_root])
    with requests.open("rb") as stdin:
        if stdout_kind == "pipe":
            done = subprocess.run(
                command, stdin=stdin, capture_output=True, env={**env, "LANG": "C.UTF-8"}, timeout=60, check=False
            )
            returncode, out = done.returncode, done.stdout
        elif stdout_kind == "file":
            with (tmp_path / "answers.jsonl").open("wb") as sink:
                returncode = subprocess.run(
                    command,
                    stdin=stdin,
                    stdout=sink,
                    stderr=subprocess.DEVNULL,
                    env={**env, "LANG": "C.UTF-8"},
                    timeout=60,
                    check=False,
                ).returncode
            out = (tmp_path / "answers.jsonl").read_bytes()
        else:
            ours, peer = socket.socketpair()
            with ours, peer:
                proc = subprocess.Popen(
                    command,
                    stdin=stdin,
                    stdout=ours.fileno(),
                    stderr=subprocess.DEVNULL,
                    env={**env, "LANG": "C.UTF-8"},
                )
                ours.close()
                chunks = []
                peer.settimeout(60)
                while chunk := peer.recv(65536):
                    chunks.append(chunk)
                returncode, out = proc.wait(timeout=60), b"".join(chunks)
    assert returncode == 0
    answers = [json.loads(line) for line in out.splitlines()]
    assert sorted(a["id"] for a in answers if a["id"] is not None) == [1, 2, 3, 4, 5]
    assert [a["error"]["code"] for a in answers if a["id"] is None] == [-32700]
