"""Many large reads at once do not take the server's memory with them (``surfaces.answer_bytes``).

The attack: a client sends dozens of ``resources/read`` of a large file, or of full ``skill_file``
batches, without waiting for any answer. Before the bound, every answer was made at once and the
server held them all: 32 reads of a 15 MB file took it to 1.07 GB (the documented container has
512 MiB, so the kernel's OOM killer ended the server). Proven here on the real server over
stdio, by its own peak RSS (``VmHWM``): four times as many requests at once cost no more memory.
The positive control: every answer arrives, whole and byte for byte the file, and a small call
after them is answered.

Over HTTP the attack is a client that asks and then never reads: each POST's answer waited in
the server's write buffer, so 120 such connections took it to 731 MB (2026-07-28 era) and
1.95 GB (handshake era) although each handler had long returned. An answer's bytes now stay
reserved until its response is written or its connection closes (``Exchange``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_skill
from tests.http.flood import read_request, unread_post
from tests.serve import child_env, serve_argv

MIB = 1024 * 1024
BLOB = 6_000_000  # above the inline read, a third of the budget: two answers in the making at once
TEXT = 950_000  # four of them make a full skill_file batch (4 MiB)
# The peak may move by allocator noise between two processes; one more answer held at once
# would cost about five times the file (bytes, base64, result, JSON, frame).
NOISE = 3 * BLOB
# A full batch answer (4 x TEXT) costs about five times its text too, and four are made at once
# within the budget, so which one the peak catches moves more: 24 MB between two runs on a
# loaded machine. Two more batch answers held at once is the noise; unbounded, 48 more batches
# at once cost +186 MB.
BATCH_NOISE = 2 * 5 * 4 * TEXT


@pytest.fixture(scope="module")
def skills(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("answer-memory")
    blob = write_skill(root, "blob", description="One large binary file.")
    (blob / "ref").mkdir()
    (blob / "ref" / "blob.bin").write_bytes(os.urandom(BLOB))
    texts = write_skill(root, "texts", description="Four large text files.")
    (texts / "ref").mkdir()
    for i in range(4):
        (texts / "ref" / f"t{i}.md").write_text(('line of text with "quotes" and \\ é\n' * 30_000)[:TEXT])
    return root


class Raw:
    """The real server over stdio, driven line by line as an attacker would: all at once."""

    def __init__(self, root: Path) -> None:
        env = {**child_env(), "SKILL_MCP_CACHE": "off"}
        self.proc = subprocess.Popen(
            serve_argv([root]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        assert "result" in self.recv()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def peak_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM")

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


def _flood(root: Path, requests: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Send every request before reading any answer; the answers by id, and the server's peak."""
    raw = Raw(root)
    try:
        for i, params in enumerate(requests):
            raw.send({"jsonrpc": "2.0", "id": 100 + i, **params})
        answers = {}
        for _ in requests:
            answer = raw.recv()
            answers[answer["id"]] = answer
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert raw.recv() == {"jsonrpc": "2.0", "id": 1, "result": {}}  # still serving
        return [answers[100 + i] for i in range(len(requests))], raw.peak_kib() * 1024
    finally:
        raw.close()


def _blob_reads(n: int) -> list[dict[str, Any]]:
    return [{"method": "resources/read", "params": {"uri": "skill://blob/ref/blob.bin"}}] * n


def _batches(n: int) -> list[dict[str, Any]]:
    args = {"name": "texts", "paths": [f"ref/t{i}.md" for i in range(4)]}
    return [{"method": "tools/call", "params": {"name": "skill_file", "arguments": args}}] * n


@pytest.mark.slow
def test_four_times_as_many_concurrent_resource_reads_cost_no_more_memory(skills: Path) -> None:
    want = hashlib.sha256((skills / "blob" / "ref" / "blob.bin").read_bytes()).hexdigest()
    few, few_peak = _flood(skills, _blob_reads(16))
    many, many_peak = _flood(skills, _blob_reads(64))
    for answer in few + many:  # the control: every answer whole, byte for byte the file
        blob = answer["result"]["contents"][0]["blob"]
        assert hashlib.sha256(base64.b64decode(blob)).hexdigest() == want
    # The denial: 48 more 6 MB reads at once hold no more (unbounded, about 5 x 6 MB each: 1.4 GB).
    assert many_peak - few_peak < NOISE, (few_peak // MIB, many_peak // MIB)


@pytest.mark.slow
def test_four_times_as_many_concurrent_skill_file_batches_cost_no_more_memory(skills: Path) -> None:
    few, few_peak = _flood(skills, _batches(16))
    many, many_peak = _flood(skills, _batches(64))
    for answer in few + many:
        result = answer["result"]
        assert not result.get("isError"), result
        assert result["structuredContent"]["served"] == 4
    assert many_peak - few_peak < BATCH_NOISE, (few_peak // MIB, many_peak // MIB)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_concurrent_large_reads_over_http_all_arrive_from_two_sessions(skills: Path, era: str) -> None:
    """Over Streamable HTTP each request's bytes come back when its answer has gone out, in both
    eras: 24 reads from two clients at once, more than the budget holds, all arrive whole."""
    import anyio

    from tests.http.harness import http_client, running_http_server

    token = "answer-memory-token-0123456789"
    want = hashlib.sha256((skills / "blob" / "ref" / "blob.bin").read_bytes()).hexdigest()
    got: list[str] = []

    async def read(client: Any) -> None:
        result = await client.read_resource("skill://blob/ref/blob.bin")
        got.append(hashlib.sha256(base64.b64decode(result.contents[0].blob)).hexdigest())

    with running_http_server([skills], token=token) as server:
        async with (
            http_client(server.url, token=token, mode=era, max_sse_event_size=16 * MIB) as one,
            http_client(server.url, token=token, mode=era, max_sse_event_size=16 * MIB) as two,
        ):
            with anyio.fail_after(90):
                async with anyio.create_task_group() as tg:
                    for i in range(24):
                        tg.start_soon(read, one if i % 2 else two)
            assert got == [want] * 24
            assert (await one.call_tool("skill_list", {})).is_error is False  # still serving


def _peak_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def _stalled_peak(skills: Path, era: str, stalled: int, want: str) -> int:
    """The server's peak with ``stalled`` unread large answers asked for at once; checks on the
    way that the server still answers a small call meanwhile, and once they are gone a reader
    gets the file whole (their reserved bytes came back)."""
    import anyio
    import httpx2

    from tests.http.harness import http_client, running_http_server

    token = "answer-memory-token-0123456789"
    with running_http_server([skills], token=token) as server:
        session = None
        if era == "legacy":
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
                init = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "s", "version": "1"},
                }
                answer = await http.post(
                    server.url,
                    json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
                    headers={"Accept": "application/json, text/event-stream"},
                )
                session = answer.headers["mcp-session-id"]
        uri = "skill://blob/ref/blob.bin"
        socks = [unread_post(server.port, token, *read_request(uri, era, 1000 + i, session)) for i in range(stalled)]
        try:
            async with http_client(server.url, token=token, mode=era, max_sse_event_size=16 * MIB) as client:
                deadline = time.monotonic() + 4  # the answers let in are made and stuck meanwhile
                while time.monotonic() < deadline:
                    listed = await client.call_tool("skill_list", {})  # the control: still serving
                    assert not listed.is_error
                    await anyio.sleep(0.5)
                peak = _peak_bytes(server.proc.pid)
                for sock in socks:
                    sock.close()
                socks = []
                with anyio.fail_after(45):
                    result = await client.read_resource("skill://blob/ref/blob.bin")
                assert hashlib.sha256(base64.b64decode(result.contents[0].blob)).hexdigest() == want
                return peak
        finally:
            for sock in socks:
                sock.close()


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_http_clients_that_never_read_their_large_answers_cannot_pile_them_up(skills: Path, era: str) -> None:
    """The denial: 48 more unread 6 MB answers hold no more memory (before, each one stayed in
    the server's write buffer: +664 MB for 120 in the 2026-07-28 era, +1.9 GB in the handshake
    era). The controls: small calls are answered meanwhile, and a reader gets the file whole
    once the stalled connections are gone."""
    want = hashlib.sha256((skills / "blob" / "ref" / "blob.bin").read_bytes()).hexdigest()
    few = await _stalled_peak(skills, era, 16, want)
    many = await _stalled_peak(skills, era, 64, want)
    assert many - few < NOISE, (few // MIB, many // MIB)
