"""Answers over Streamable HTTP in a form every official client accepts, whatever their size.

The SDK answers a call's POST with a Server-Sent Event stream (handshake era always; the
2026-07-28 era once a call outlasts its 15 s deferral or sends a notification first), and the
official Python client refuses any one event over 1 MiB (``DEFAULT_MAX_SSE_EVENT_SIZE``,
"Server-sent event exceeded the 1048576 byte limit"): the session breaks instead of getting an
answer, although ``skill_file`` may answer 4 MiB and a resource may be 16 MiB. A JSON body has
no such cap in any official client (it is read whole, like a stdio line).

``EventSizing`` sits between the guard and the SDK's app and, for every POST:

1. holds back the SSE response's start while nothing has been streamed;
2. if the first event is the call's own answer (a JSON-RPC response or error), sends it as an
   ``application/json`` body instead, with the same status and session header - the Streamable
   HTTP transport lets a server answer a POST either way, and clients must accept both;
3. anything else first (a notification, a server-to-client request such as ``skill_run``'s
   confirmation, or the stream's keep-alive comment, which the SDK sends after 15 s) commits
   the stream as SSE, unchanged, so elicitation and progress keep working;
4. on a committed stream, an event the client would refuse is never sent: an answer becomes a
   JSON-RPC error with ``data.reason: "answer-too-large"`` (its size and the limit), so the
   client gets a result it can act on; an oversized notification is dropped and logged;
5. writes a large body in ``WRITE_CHUNK`` pieces, and holds the POST's ``Exchange`` (in its
   scope) open until the response is written or the connection is gone: the bytes the answer
   reserved (``surfaces.answer_bytes``) are counted until then, so answers a client does not
   read wait in the server, bounded, not in the transport's buffer.

The size an event counts is the client's: the UTF-8 bytes of its field lines, separators
excluded (``event: message`` plus ``data: ...``).
"""

from __future__ import annotations

import json
import logging
from typing import Any, TypeGuard

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.answer_bytes import EXCHANGE_KEY, Exchange

logger = logging.getLogger("skill_mcp.http")

# The official Python SDK client's default cap on one SSE event (mcp.client.streamable_http).
CLIENT_EVENT_LIMIT = 1024 * 1024
SERVER_ERROR = -32000


def event_lines(chunk: bytes) -> list[bytes] | None:
    """The field lines of the one event ``chunk`` holds (comments left out); None unless
    ``chunk`` is exactly one complete event, or only comments (``[]``)."""
    text = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if not text.endswith(b"\n\n"):
        return None
    lines = text[:-2].split(b"\n")
    if b"" in lines:  # a second event in the same chunk
        return None
    return [line for line in lines if not line.startswith(b":")]


def event_size(lines: list[bytes]) -> int:
    return sum(len(line) for line in lines)


def event_data(lines: list[bytes]) -> Any:
    """The decoded JSON of an event's ``data`` lines; None when there is none or it is not JSON."""
    data = b"\n".join(line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:"))
    if not data:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def is_answer(message: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)


def too_large(message: dict[str, Any], size: int) -> dict[str, Any]:
    """The JSON-RPC error that replaces an answer no client would accept in one event."""
    return {
        "jsonrpc": "2.0",
        "id": message.get("id"),
        "error": {
            "code": SERVER_ERROR,
            "message": (
                f"the answer is {size} bytes, over the {CLIENT_EVENT_LIMIT} bytes a client accepts in one "
                "server-sent event; ask for less per call (fewer paths in skill_file) or use stdio"
            ),
            "data": {"reason": str(Refusal.ANSWER_TOO_LARGE), "size": size, "limit": CLIENT_EVENT_LIMIT},
        },
    }


# Room left in one event for the JSON-RPC envelope, the event's field names and a result's
# other blocks; an answer is fitted to CLIENT_EVENT_LIMIT minus this.
ENVELOPE_ROOM = 8 * 1024
RUN_STREAMS = ("stdout", "stderr")
# The pieces a large body is written in (``_Response._write``): what one connection whose client
# stopped reading keeps in the server's write buffer besides the transport's own 64 KiB.
WRITE_CHUNK = 64 * 1024


def wire_size(out: dict[str, Any]) -> int:
    """Bytes a tool result built from ``out`` takes in one message: ``structuredContent`` plus the
    default text block, which repeats it as an escaped JSON string."""
    text = json.dumps(out, ensure_ascii=False)
    return len(text.encode()) + len(json.dumps(text, ensure_ascii=False).encode())


def fit_run_output(out: dict[str, Any], limit: int = CLIENT_EVENT_LIMIT - ENVELOPE_ROOM) -> dict[str, Any]:
    """``skill_run``'s result with stdout and stderr cut (from the end) until it fits ``limit``.

    A cut stream is marked ``truncated`` and its bytes are added to ``droppedBytes``, with a note:
    the run happened and its exit code stands, only less of its output comes back.
    """
    size = wire_size(out)
    if size <= limit:
        return out
    fitted = dict(out)
    for _ in range(8):
        keep = max(0.0, limit / size * 0.95)
        for name in RUN_STREAMS:
            fitted[name] = fitted[name][: int(len(fitted[name]) * keep)]
        size = wire_size(fitted)
        if size <= limit:
            break
    else:
        fitted.update({name: "" for name in RUN_STREAMS})
    dropped = sum(len(out[n].encode()) - len(fitted[n].encode()) for n in RUN_STREAMS)
    fitted["truncated"] = {n: bool(out["truncated"][n]) or fitted[n] != out[n] for n in RUN_STREAMS}
    fitted["droppedBytes"] = int(out.get("droppedBytes", 0)) + dropped
    fitted["notes"] = [
        *out.get("notes", []),
        (
            f"output cut by {dropped} bytes so the answer fits one HTTP event ({CLIENT_EVENT_LIMIT} bytes, what "
            "clients accept); over stdio the whole capture (1 MiB per stream) comes back"
        ),
    ]
    return fitted


def sse_frame(message: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + json.dumps(message, separators=(",", ":")).encode() + b"\r\n\r\n"


class _Response:
    """One POST's response as it passes: held, sent as JSON, or streamed as SSE."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.held: Message | None = None  # the SSE start, not sent yet
        self.done = False  # answered as JSON: the rest of the SSE stream is dropped
        self.streaming = False

    async def __call__(self, message: Message) -> None:
        if self.done:
            return
        kind = message["type"]
        if kind == "http.response.start":
            if _is_sse(message):
                self.held = message
                return
            await self.send(message)
            return
        if kind != "http.response.body":
            await self.send(message)
            return
        if not (self.held is not None or self.streaming):
            await self._write(message)
            return
        await self._body(message)

    async def _write(self, message: Message) -> None:
        """Send a body message in pieces of ``WRITE_CHUNK``: uvicorn waits for the connection to
        drain before it takes each piece, so the response's last piece is taken only once the
        client has read nearly all of it. Sent whole, an answer sits in the transport's buffer
        for as long as its client does not read, and its exchange (which owns the answer's
        reserved bytes) would end at once."""
        body = message.get("body", b"")
        if len(body) <= WRITE_CHUNK:
            await self.send(message)
            return
        more = message.get("more_body", False)
        view = memoryview(body)
        for start in range(0, len(body), WRITE_CHUNK):
            last = start + WRITE_CHUNK >= len(body)
            piece = bytes(view[start : start + WRITE_CHUNK])
            await self.send({"type": "http.response.body", "body": piece, "more_body": more or not last})

    async def _body(self, message: Message) -> None:
        chunk = message.get("body", b"")
        lines = event_lines(chunk) if chunk else None
        data = event_data(lines) if lines else None
        if self.held is not None:
            if lines and is_answer(data):
                await self._as_json(chunk, lines)
                return
            if not chunk and message.get("more_body", False):
                return  # an empty write while held says nothing yet
            await self._commit()
        if lines and event_size(lines) > CLIENT_EVENT_LIMIT:
            size = event_size(lines)
            if is_answer(data):
                message = {**message, "body": sse_frame(too_large(data, size))}
                logger.warning(
                    "an answer too large for one event was replaced by an error",
                    extra={"event": "http-answer-too-large", "size": size, "limit": CLIENT_EVENT_LIMIT},
                )
            else:
                logger.warning(
                    "a notification too large for one event was dropped",
                    extra={"event": "http-event-dropped", "size": size, "limit": CLIENT_EVENT_LIMIT},
                )
                return
        await self._write(message)

    async def _commit(self) -> None:
        held, self.held = self.held, None
        self.streaming = True
        if held is not None:
            await self.send(held)

    async def _as_json(self, chunk: bytes, lines: list[bytes]) -> None:
        held, self.held = self.held, None
        assert held is not None
        body = b"\n".join(line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:"))
        keep = [
            (k, v)
            for k, v in held.get("headers", [])
            if k.lower()
            not in (
                b"content-type",
                b"content-length",
                b"cache-control",
                b"connection",
                b"x-accel-buffering",
                b"transfer-encoding",
            )
        ]
        headers = [*keep, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        self.done = True
        await self.send({"type": "http.response.start", "status": held.get("status", 200), "headers": headers})
        await self._write({"type": "http.response.body", "body": body, "more_body": False})


def _is_sse(message: Message) -> bool:
    return any(
        k.lower() == b"content-type" and v.lower().startswith(b"text/event-stream")
        for k, v in message.get("headers", [])
    )


class EventSizing:
    """ASGI middleware: POST answers as JSON when they can be, and never an event a client refuses."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        # The answer's reserved bytes (surfaces.answer_bytes) are the exchange's until its
        # response is written or its connection is gone: finished on every way out.
        exchange = scope[EXCHANGE_KEY] = Exchange()
        try:
            await self.app(scope, receive, _Response(send))
        finally:
            exchange.finish()
