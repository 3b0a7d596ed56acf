"""Answering calls the drain has to stop (see ``surfaces.http.transport``).

To answer a call whose stream is being cut at shutdown, the guard needs its JSON-RPC id (read
from the request body, which it buffers and replays to the SDK) and what has already gone out
(nothing, an SSE stream, or a complete response). A started SSE stream takes one more event
carrying the error; a response not yet started becomes a JSON error; a started plain JSON
response cannot take a second answer and just ends.
"""

from __future__ import annotations

import json

import anyio
from starlette.types import Message, Receive, Send

from skill_mcp.reasons import Refusal

# The SDK refuses bodies over 4 MiB itself; past this the guard just stops looking for an id.
BODY_PEEK_LIMIT = 4 * 1024 * 1024


async def buffered(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """Read the request body (up to ``limit``) and return it with a ``receive`` that replays it."""
    seen: list[Message] = []
    size = 0
    complete = False
    while True:
        message = await receive()
        seen.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            complete = True
            break
        if size > limit:
            break
    body = b"".join(m.get("body", b"") for m in seen if m["type"] == "http.request") if complete else None

    async def replay() -> Message:
        if seen:
            return seen.pop(0)
        return await receive()

    return body, replay


def request_id_of(body: bytes | None) -> str | int | None:
    """The JSON-RPC id of a single request (not a notification, not a response)."""
    return parse_request(body)[0]


def parse_request(body: bytes | None) -> tuple[str | int | None, str | None]:
    """``(id, method)`` of a single JSON-RPC request; ``(None, None)`` for anything else."""
    if not body:
        return None, None
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(decoded, dict) or not isinstance(decoded.get("method"), str):
        return None, None
    rid = decoded.get("id")
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        return None, None
    return rid, decoded["method"]


class ResponseWatch:
    """What has gone out for one request: nothing, an SSE stream, or a complete response."""

    def __init__(self) -> None:
        self.started = False
        self.sse = False
        self.complete = False

    def observe(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            for key, value in message.get("headers", []):
                if key.lower() == b"content-type" and value.lower().startswith(b"text/event-stream"):
                    self.sse = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True


async def answer_stopped(send: Send, response: ResponseWatch, request_id: str | int) -> None:
    """Answer a call the drain had to stop, on whatever the response already is."""
    error = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": -32000,
            "message": "the server is shutting down; the call was stopped",
            "data": {"reason": str(Refusal.HTTP_DRAINING)},
        },
    }
    payload = json.dumps(error).encode()
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        if not response.started:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(payload)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": payload})
        elif response.sse:
            await send(
                {"type": "http.response.body", "body": b"event: message\ndata: " + payload + b"\n\n", "more_body": True}
            )
            await send({"type": "http.response.body", "body": b""})
        # A started non-SSE response cannot take a second answer; the connection just closes.
