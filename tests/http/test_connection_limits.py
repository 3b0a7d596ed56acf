"""Idle and slow connections cannot take the HTTP transport away from an authenticated client.

A real ``skill-mcp serve --http`` on 127.0.0.1 with a token; the attack is raw sockets from the
same address as the legitimate client (as behind a reverse proxy, where every client is one
address), the legitimate client httpx and the SDK's client. Each denial has its positive
control: the attack connections were really open when the client was answered, a complete
head is answered while a slow one is cut, a call in flight survives the evictions around it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from skill_mcp.surfaces.http.conn import DEFAULT_LIMITS, LOG_EVERY_S
from tests.helpers import eventually, pids_with
from tests.http.flood import PARTIAL_HEAD, connect, flood, is_closed, modern_tools_list, read_request, unread_post
from tests.http.harness import HttpServer, http_client, running_http_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
TOKEN = "flood-token-0123456789abcdef"
LIMITS = DEFAULT_LIMITS
IDLE, SLOW = 300, 60
ANSWER_BOUND_S = 5.0
MARGIN_S = 10.0
BLOB = 6_000_000  # a file whose answer (8 MB of base64) no socket buffer holds

SLEEPER_MD = """---
name: sleeper
description: Sleeps for a while, to hold a call in flight.
mcp-host:
  version: 1
  run:
    - script: scripts/sleep.py
      interpreter: python
      timeout: 60
---

Run scripts/sleep.py SECONDS [MARKER].
"""
SLEEP_PY = "import sys, time\ntime.sleep(float(sys.argv[1]))\nprint('slept', sys.argv[1])\n"


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """World-readable: a root server drops scripts to ``nobody``, who cannot enter pytest's tmp."""
    path = Path(tempfile.mkdtemp(prefix="skill-mcp-http-limits-"))
    skill = path / "sleeper"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SLEEPER_MD, encoding="utf-8")
    (skill / "scripts" / "sleep.py").write_text(SLEEP_PY, encoding="utf-8")
    (skill / "ref").mkdir()
    (skill / "ref" / "blob.bin").write_bytes(os.urandom(BLOB))
    for p in (path, skill, skill / "scripts", skill / "ref"):
        os.chmod(p, 0o755)
    os.chmod(skill / "ref" / "blob.bin", 0o644)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture()
def server(root: Path) -> Iterator[HttpServer]:
    with running_http_server([root], token=TOKEN) as srv:
        yield srv


def _shed_lines(server: HttpServer) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.stderr_lines if '"http-connections-shed"' in line]


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed ``sock``, or None if it is still open after ``seconds``."""
    started = time.monotonic()
    if eventually(lambda: is_closed(sock), timeout=seconds):
        return time.monotonic() - started
    return None


def _head(extra: bytes = b"") -> bytes:
    return b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + b"\r\n"


def _answer_status(sock: socket.socket, timeout: float = 20.0) -> int:
    """The status code of the first answer on ``sock`` (blocking read, bounded)."""
    sock.setblocking(True)
    sock.settimeout(timeout)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    sock.setblocking(False)
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0


def test_idle_connections_cannot_starve_an_authenticated_client(server: HttpServer) -> None:
    with flood(server.port) as attack:
        attack.open_idle(IDLE)
        attack.open_slow(SLOW)
        started = time.monotonic()
        response = modern_tools_list(server.url, TOKEN, timeout=30)
        took = time.monotonic() - started
        idle_open, slow_open = attack.open_count(attack.idle), attack.open_count(attack.slow)
        print(
            f"\nunder {IDLE} idle + {SLOW} slow-header connections: answered {response.status_code} "
            f"in {took * 1000:.0f} ms; attack connections open {idle_open + slow_open}"
        )
        assert response.status_code == 200, response.text
        assert "skill_list" in {t["name"] for t in response.json()["result"]["tools"]}
        assert took < ANSWER_BOUND_S
        # Positive control: the server was holding its per-address cap of attack connections
        # (the newest, every slow one among them) while it answered; only the oldest idle
        # ones were evicted to make room.
        assert slow_open == SLOW
        assert idle_open + slow_open >= LIMITS.max_per_peer - 5
        assert attack.open_count(attack.idle[: IDLE + SLOW - LIMITS.max_per_peer]) == 0

        async def session() -> set[str]:
            async with http_client(server.url, token=TOKEN, mode="legacy") as client:
                return {t.name for t in (await client.list_tools()).tools}

        # A whole handshake-era session through the SDK's client, from the same address, too.
        assert "skill_list" in anyio.run(session)
    # The evictions are in the log at once (the rest of the burst follows in the next summary);
    # the line reaches us through a reader thread.
    assert eventually(lambda: bool(_shed_lines(server)), timeout=MARGIN_S)
    shed = _shed_lines(server)
    assert shed and shed[0]["causes"].get("peer-cap", 0) > 0
    assert shed[0]["topPeers"][0]["peer"] == "127.0.0.1"


def test_slow_header_connection_is_closed_after_the_head_deadline(server: HttpServer) -> None:
    slow, silent = connect(server.port), connect(server.port)
    try:
        slow.send(PARTIAL_HEAD)
        started = time.monotonic()
        # Positive control while the slow head is pending: a complete head is answered.
        prompt = connect(server.port)
        try:
            prompt.send(_head())
            assert _answer_status(prompt) == 401
        finally:
            prompt.close()
        for _ in range(3):
            time.sleep(2)
            slow.send(b"a")  # bytes keep arriving: the deadline is on the head, not on silence
        closed_after = _closed_within(slow, LIMITS.head_timeout_s + MARGIN_S - (time.monotonic() - started))
        assert closed_after is not None, "a slow request head was never cut"
        total = time.monotonic() - started
        assert LIMITS.head_timeout_s - 1 <= total <= LIMITS.head_timeout_s + MARGIN_S
        # A connection that never sent a byte is under the same deadline.
        assert is_closed(silent)
    finally:
        slow.close()
        silent.close()
    # The summary line is written just after the cut, and reaches us through a reader thread.
    assert eventually(
        lambda: any(line["causes"].get("head-timeout") for line in _shed_lines(server)), timeout=MARGIN_S
    ), _shed_lines(server)


def test_request_head_over_the_size_bound_is_refused_and_one_under_it_answered(server: HttpServer) -> None:
    big, fair = connect(server.port), connect(server.port)
    try:
        filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
        fair.send(_head(filler * (LIMITS.max_head_bytes // 2 // len(filler))))
        assert _answer_status(fair) == 401  # the guard answered it: the head was accepted
        big.setblocking(True)
        big.send(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with contextlib.suppress(OSError):  # the server may close before the last of it
            for _ in range(LIMITS.max_head_bytes // len(filler) + 2):
                big.send(filler)
        assert _answer_status(big) == 400
        assert _closed_within(big, MARGIN_S) is not None
    finally:
        big.close()
        fair.close()


def test_idle_keep_alive_connection_is_closed_after_its_timeout(server: HttpServer) -> None:
    sock = connect(server.port)
    try:
        sock.send(_head())
        assert _answer_status(sock) == 401
        started = time.monotonic()
        assert not is_closed(sock)  # positive control: kept alive after the answer
        assert _closed_within(sock, LIMITS.keep_alive_s + MARGIN_S) is not None
        assert time.monotonic() - started >= LIMITS.keep_alive_s - 1
    finally:
        sock.close()


def test_per_address_cap_evicts_the_oldest_idle_connection_not_a_call_in_flight(server: HttpServer) -> None:
    extra = 40
    marker = f"m-{uuid.uuid4().hex}"  # finds the call's script in /proc
    outcome: dict[str, Any] = {}

    async def main() -> None:
        async with http_client(server.url, token=TOKEN, mode="legacy") as client:
            args = {"skill": "sleeper", "script": "scripts/sleep.py", "args": ["6", marker]}
            first = await client.call_tool("skill_run", args)
            assert first.structured_content is not None
            token = first.structured_content["confirmToken"]
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    result = await client.call_tool("skill_run", {**args, "confirmToken": token})
                    outcome["result"] = result.structured_content

                tg.start_soon(call)
                # The call is in flight once its script runs (it sleeps 6 s): a fixed pause would
                # let a flood on a loaded machine come while the call's head is still unread.
                running = await anyio.to_thread.run_sync(eventually, lambda: pids_with(marker), MARGIN_S)
                assert running, "the call's script never started"
                await anyio.to_thread.run_sync(attack_while_running)

    def attack_while_running() -> None:
        with flood(server.port) as attack:
            attack.open_idle(LIMITS.max_per_peer + extra)
            oldest, newest = attack.idle[:extra], attack.idle[-(LIMITS.max_per_peer - 10) :]
            assert eventually(lambda: attack.open_count(oldest) == 0, timeout=MARGIN_S), (
                "the per-address cap evicted nothing"
            )
            assert attack.open_count(newest) == len(newest)  # the newest idle ones stay
            outcome["open_during_call"] = attack.open_count(attack.idle)
            outcome["call_done_during_attack"] = "result" in outcome

    anyio.run(main)
    result = outcome["result"]
    assert result is not None and result.get("status") == "ok", result
    assert "slept" in str(result.get("stdout"))
    assert not outcome["call_done_during_attack"], "the attack ended before the call: it proved nothing"
    # The in-flight call's connection was older than every idle one and survived; the attack
    # was held at the cap less the connections the client itself holds.
    assert outcome["open_during_call"] <= LIMITS.max_per_peer

    def evicted() -> int:
        return sum(line["causes"].get("peer-cap", 0) for line in _shed_lines(server))

    assert eventually(lambda: evicted() >= extra, timeout=LOG_EVERY_S + MARGIN_S), _shed_lines(server)
    # Rate-limited: a summary line at once, then at most one per period, not one per eviction.
    shed = _shed_lines(server)
    stamps = [datetime.fromisoformat(line["ts"].replace("Z", "+00:00")) for line in shed]
    assert len(shed) <= 3
    assert all((b - a).total_seconds() >= LOG_EVERY_S - 1 for a, b in itertools.pairwise(stamps))


def test_requests_in_flight_beyond_the_limit_get_503_busy_and_idle_sockets_never_count(server: HttpServer) -> None:
    # An authenticated POST whose body never comes holds its request in flight (the guard waits
    # for the body); idle sockets beside them hold nothing.
    hold = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        + TOKEN.encode()
        + b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        b"Content-Length: 100\r\n\r\n"
    )
    with flood(server.port) as attack:
        holders = [connect(server.port) for _ in range(LIMITS.max_in_flight)]
        try:
            for sock in holders:
                sock.send(hold)
            answers: list[Any] = []

            def refused_busy() -> bool:  # once the server has read every holder's head
                answers.append(modern_tools_list(server.url, TOKEN))
                return bool(answers[-1].status_code == 503)

            # The flood comes only once every holder is in flight: a connection whose head the
            # server has not read yet is still waiting, so evictable (the documented moment
            # between a connect and the end of its head; on a loaded machine it is long).
            assert eventually(refused_busy, timeout=MARGIN_S), [a.status_code for a in answers]
            attack.open_idle(LIMITS.max_per_peer - LIMITS.max_in_flight + 20)  # past the cap: evictions
            answers.clear()
            assert eventually(refused_busy, timeout=MARGIN_S), [a.status_code for a in answers]
            busy = answers[-1]
            assert busy.json()["error"]["data"]["reason"] == "http-busy"
            assert busy.headers["retry-after"] == "1"
            # Positive controls: every request in flight survived the evictions, and one fewer
            # in flight lets the next request through.
            assert all(not is_closed(s) for s in holders)
            assert attack.open_count(attack.idle) < len(attack.idle)
            holders.pop().close()
            assert eventually(lambda: modern_tools_list(server.url, TOKEN).status_code == 200, timeout=MARGIN_S)
        finally:
            for sock in holders:
                sock.close()
    assert eventually(
        lambda: any(line["causes"].get("busy") for line in _shed_lines(server)), timeout=LOG_EVERY_S + MARGIN_S
    )


def test_the_global_cap_evicts_from_the_heaviest_address_and_admits_a_new_one(server: HttpServer) -> None:
    with flood(server.port) as attack:
        light = attack.open_idle(LIMITS.max_connections - LIMITS.max_per_peer - 56, source="127.0.0.2")
        heavy = attack.open_idle(LIMITS.max_per_peer, source="127.0.0.3")
        other = attack.open_idle(56, source="127.0.0.4")  # the global cap is now reached
        response = modern_tools_list(server.url, TOKEN)
        assert response.status_code == 200, response.text
        # The newcomer from a fourth address took the place of the heaviest address's oldest
        # connection; the lighter addresses lost nothing.
        assert eventually(lambda: is_closed(heavy[0]), timeout=MARGIN_S)
        assert attack.open_count(light) == len(light) and attack.open_count(other) == len(other)
        assert attack.open_count(heavy[-(LIMITS.max_per_peer - 5) :]) == LIMITS.max_per_peer - 5
    assert eventually(
        lambda: any(line["causes"].get("global-cap") for line in _shed_lines(server)), timeout=LOG_EVERY_S + MARGIN_S
    )


def _drain(sock: socket.socket) -> tuple[int, str]:
    """Read what is left on ``sock``: the byte count, and how it ended (``eof`` or ``reset``)."""
    sock.settimeout(10)
    got = 0
    try:
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
    except ConnectionResetError:
        return got, "reset"
    return got, "eof"


def test_a_client_that_stops_reading_its_answer_is_dropped_after_the_write_deadline(server: HttpServer) -> None:
    """The denial: a connection that takes nothing of a large answer for ``write_stall_s`` is
    dropped (its unsent bytes, its reserved answer bytes and its in-flight slot with it), and
    logged as ``write-stall``. The controls: a client reading the same answer slowly (32 KiB/s,
    much slower than the answer is made) keeps its connection past the deadline, and a call
    during the stall is answered."""
    uri = "skill://sleeper/ref/blob.bin"
    stalled = unread_post(server.port, TOKEN, *read_request(uri, "2026-07-28", 1))
    slow = unread_post(server.port, TOKEN, *read_request(uri, "2026-07-28", 2))
    started = time.monotonic()
    try:
        assert modern_tools_list(server.url, TOKEN).status_code == 200
        slow.settimeout(10)
        slow_got = 0
        dropped_at = None
        while time.monotonic() - started < LIMITS.write_stall_s + MARGIN_S:
            chunk = slow.recv(16 * 1024)
            assert chunk, "the slow reader's connection was closed"
            slow_got += len(chunk)
            time.sleep(0.5)
            if dropped_at is None and any(line["causes"].get("write-stall") for line in _shed_lines(server)):
                dropped_at = time.monotonic() - started
            if dropped_at is not None and time.monotonic() - started > LIMITS.write_stall_s + 3:
                break
        assert dropped_at is not None, "a client that read nothing was never dropped"
        assert dropped_at >= LIMITS.write_stall_s - 1
        got, end = _drain(stalled)
        assert got < BLOB and end in ("eof", "reset")  # what it never read is gone
        assert 0 < slow_got < BLOB  # still reading when the other was dropped
        slow.setblocking(False)
        assert is_closed(slow) is False
    finally:
        stalled.close()
        slow.close()
