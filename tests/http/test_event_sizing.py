"""No answer breaks the official client: large answers over HTTP in both eras, and over stdio.

The SDK's Python client refuses one server-sent event over 1 MiB. Before ``EventSizing`` a
``skill_file`` batch above that (the tool allows 4 MiB) broke a handshake-era HTTP session with
"Server-sent event exceeded the 1048576 byte limit". Every test here uses the client with its
default cap, as users run it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from skill_mcp.surfaces.answer_bytes import EXCHANGE_KEY, Exchange
from skill_mcp.surfaces.http.events import (
    CLIENT_EVENT_LIMIT,
    WRITE_CHUNK,
    EventSizing,
    event_data,
    event_lines,
    event_size,
    fit_run_output,
    too_large,
    wire_size,
)
from tests.http.harness import http_client, running_http_server
from tests.serve import stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]
TOKEN = "sizing-token-0123456789abcdef"
PART = 600 * 1024  # three parts: 1.8 MiB of text, twice that on the wire (content and structuredContent)
FLOOD = "import sys\nsys.stdout.write('o' * (1024 * 1024))\nsys.stderr.write('e' * (1024 * 1024))\n"
SKILL = """---
name: big
description: Big files and a loud script. Use when testing large answers.
mcp-host:
  version: 1
  run:
    - script: scripts/flood.py
      interpreter: python
---
# Big

1. Read the parts.
"""


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """Readable by every uid: a root server drops the script to ``nobody``."""
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-sizing-"))
    base.chmod(0o755)
    skill = base / "big"
    (skill / "data").mkdir(parents=True)
    (skill / "scripts").mkdir()
    (skill / "SKILL.md").write_text(SKILL, encoding="utf-8")
    for i in range(3):
        (skill / "data" / f"part{i}.txt").write_text(
            f"{i}\n" + 'line of text "quoted"\n' * (PART // 22), encoding="utf-8"
        )
    (skill / "data" / "whole.txt").write_bytes(b"w" * (1024 * 1024))
    (skill / "scripts" / "flood.py").write_text(FLOOD, encoding="utf-8")
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


PATHS = [f"data/part{i}.txt" for i in range(3)]


async def _read_everything(client: Client) -> None:
    result = await client.call_tool("skill_file", {"name": "big", "paths": PATHS})
    assert not result.is_error
    out = result.structured_content or {}
    assert out["served"] == 3 and [f["path"] for f in out["files"]] == PATHS
    assert sum(f["size"] for f in out["files"]) > CLIENT_EVENT_LIMIT
    contents = (await client.read_resource("skill://big/data/whole.txt")).contents
    assert len(contents[0].text) == 1024 * 1024  # type: ignore[union-attr]
    # The session still works after the large answers.
    assert (await client.call_tool("skill_list", {})).structured_content["total"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_a_skill_file_batch_over_1_mib_reaches_the_sdk_client_over_http(root: Path, era: str) -> None:
    with running_http_server([root], token=TOKEN) as server:
        async with http_client(server.url, token=TOKEN, mode=era, max_sse_event_size=CLIENT_EVENT_LIMIT) as client:
            await _read_everything(client)


@pytest.mark.slow
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_a_skill_file_batch_over_1_mib_reaches_the_sdk_client_over_stdio(root: Path, era: str) -> None:
    async with Client(stdio_params([root]), mode=era, read_timeout_seconds=60) as client:
        await _read_everything(client)


async def _accept(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.slow
async def test_a_run_answered_on_a_confirmation_stream_comes_back_cut_to_fit(root: Path) -> None:
    """skill_run asks mid-call, so its answer must travel on the SSE stream: 2 MiB of output
    comes back cut to what one event carries, marked truncated, instead of breaking the session."""
    with running_http_server([root], token=TOKEN) as server:
        async with http_client(server.url, token=TOKEN, mode="legacy", elicitation_callback=_accept) as client:
            result = await client.call_tool("skill_run", {"skill": "big", "script": "scripts/flood.py"})
            out = result.structured_content or {}
            assert (out["status"], out["exitCode"]) == ("ok", 0)
            assert out["truncated"] == {"stdout": True, "stderr": True}
            assert out["stdout"].startswith("ooo") and out["stderr"].startswith("eee")
            assert out["droppedBytes"] >= 2 * 1024 * 1024 - CLIENT_EVENT_LIMIT
            assert any("fits one HTTP event" in note for note in out["notes"])
            assert (await client.call_tool("skill_list", {})).structured_content["total"] == 1


# Pure parts of the middleware.


def test_event_lines_reads_one_complete_event_and_ignores_comments() -> None:
    assert event_lines(b'event: message\r\ndata: {"id":1}\r\n\r\n') == [b"event: message", b'data: {"id":1}']
    assert event_lines(b": ping\r\n\r\n") == []
    assert event_lines(b"data: 1\n\ndata: 2\n\n") is None  # two events
    assert event_lines(b"data: 1\n") is None  # incomplete


def test_event_size_counts_what_the_client_counts() -> None:
    lines = event_lines(b"event: message\r\ndata: " + b"x" * 10 + b"\r\n\r\n")
    assert lines is not None and event_size(lines) == len("event: message") + len("data: ") + 10


def test_an_oversized_answer_becomes_an_error_that_keeps_its_id() -> None:
    lines = event_lines(b'event: message\ndata: {"jsonrpc":"2.0","id":7,"result":{}}\n\n')
    assert lines is not None
    error = too_large(event_data(lines), 2 * CLIENT_EVENT_LIMIT)
    assert error["id"] == 7 and error["error"]["data"] == {
        "reason": "answer-too-large",
        "size": 2 * CLIENT_EVENT_LIMIT,
        "limit": CLIENT_EVENT_LIMIT,
    }


def test_a_run_result_is_cut_to_the_limit_and_says_so() -> None:
    out: dict[str, Any] = {
        "status": "error",
        "exitCode": 3,
        "signal": None,
        "stdout": "o\n" * 400_000,
        "stderr": "\u00e9" * 300_000,
        "truncated": {"stdout": False, "stderr": True},
        "droppedBytes": 10,
        "durationMs": 5,
    }
    fitted = fit_run_output(out, limit=500_000)
    assert wire_size(fitted) <= 500_000 and fitted["exitCode"] == 3
    assert fitted["truncated"] == {"stdout": True, "stderr": True}
    assert out["stdout"].startswith(fitted["stdout"]) and out["stderr"].startswith(fitted["stderr"])
    cut = (
        len(out["stdout"].encode())
        + len(out["stderr"].encode())
        - len(fitted["stdout"].encode())
        - len(fitted["stderr"].encode())
    )
    assert fitted["droppedBytes"] == 10 + cut
    small = {**out, "stdout": "ok", "stderr": ""}
    assert fit_run_output(small) is small


def _recorder() -> tuple[list[dict[str, Any]], Any]:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    return sent, send


async def _nothing() -> dict[str, Any]:
    return {"type": "http.disconnect"}


def _answer_event(size: int) -> tuple[bytes, bytes]:
    """An SSE event carrying a JSON-RPC answer of about ``size`` bytes, and that answer's JSON."""
    data = b'{"jsonrpc":"2.0","id":7,"result":{"blob":"' + b"A" * size + b'"}}'
    return b"event: message\r\ndata: " + data + b"\r\n\r\n", data


@pytest.mark.parametrize("size", [10, WRITE_CHUNK - 100, 3 * WRITE_CHUNK + 5, 1024 * 1024])
async def test_an_answer_is_written_in_pieces_the_connection_takes_one_at_a_time(size: int) -> None:
    """A large body goes out in ``WRITE_CHUNK`` pieces (uvicorn waits for the connection to drain
    before each), so an unread answer is not parked whole in the write buffer; joined, the pieces
    are the answer, and only the last ends the body."""
    event, data = _answer_event(size)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": event, "more_body": True})

    sent, send = _recorder()
    await EventSizing(app)({"type": "http", "method": "POST"}, _nothing, send)
    start, *bodies = sent
    assert dict(start["headers"])[b"content-type"] == b"application/json"
    assert b"".join(m["body"] for m in bodies) == data
    assert all(len(m["body"]) <= WRITE_CHUNK for m in bodies)
    assert [m["more_body"] for m in bodies] == [True] * (len(bodies) - 1) + [False]
    assert len(bodies) == max(1, -(-len(data) // WRITE_CHUNK))


async def test_a_committed_stream_and_a_plain_body_are_written_in_pieces_too() -> None:
    event, _ = _answer_event(2 * WRITE_CHUNK)

    async def sse(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})  # commits SSE
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sent, send = _recorder()
    await EventSizing(sse)({"type": "http", "method": "POST"}, _nothing, send)
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert b"".join(m["body"] for m in bodies) == b": ping\r\n\r\n" + event
    assert max(len(m["body"]) for m in bodies) <= WRITE_CHUNK and bodies[-1]["more_body"] is False
    assert all(m["more_body"] for m in bodies[:-1])

    plain = b"x" * (2 * WRITE_CHUNK + 1)

    async def json_app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": plain})

    sent, send = _recorder()
    await EventSizing(json_app)({"type": "http", "method": "POST"}, _nothing, send)
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert b"".join(m["body"] for m in bodies) == plain and len(bodies) == 3
    assert [m["more_body"] for m in bodies] == [True, True, False]


@pytest.mark.parametrize("fails", [False, True])
async def test_every_post_has_an_open_exchange_that_finishes_on_every_way_out(fails: bool) -> None:
    """The answer's reserved bytes are the exchange's (``surfaces.answer_bytes``): open while the
    SDK's app runs, finished once it has returned or raised. A GET (a notification stream)
    carries no answer and gets none."""
    seen: list[Exchange] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] == "POST":
            exchange = scope[EXCHANGE_KEY]
            assert not exchange.finished
            seen.append(exchange)
        else:
            assert EXCHANGE_KEY not in scope
        if fails:
            raise OSError("the connection broke")

    _, send = _recorder()
    for method in ("POST", "GET"):
        try:
            await EventSizing(app)({"type": "http", "method": method}, _nothing, send)
        except OSError:
            assert fails
    assert len(seen) == 1 and seen[0].finished
