"""The broker protocol: length-prefixed JSON frames over an inherited AF_UNIX stream socket.

    frame   = u32 big-endian length, then that many bytes of UTF-8 JSON (one object)
    request = {"v": 2, "id": n, "op": "hello"}
            | {"v": 2, "id": n, "op": "run", "run": {"skill", "script", "args": [...], "timeout_s"?,
                                                   "interpreter"?, "env"?: [names], "egress"?: [hosts]}}
    reply   = {"v": 2, "id": n, "ok": true, ...}
            | {"v": 2, "id": n, "ok": false, "reason": "<Refusal value>", "detail": "...", "data": {...}}

A run request only asks; the broker decides the rest (``skill_mcp_launcher.checks``).

Stdlib only: both the launcher and the server's broker client import this module. A frame
over ``MAX_FRAME`` is a protocol violation; the launcher closes the connection rather than
allocate what a compromised server asks for. A whole frame whose body is not a JSON object,
or nests deeper than ``jsonbound.MAX_DEPTH`` (measured before the decoder sees it), is a
``BadFrame``: the launcher answers it with a refusal and keeps the conversation.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

from skill_mcp import jsonbound

VERSION = 2  # 2: a run request names what to run; the broker no longer takes a plan
MAX_FRAME = 32 * 1024 * 1024  # two 1 MiB captures, JSON-escaped at worst six bytes a byte
# A reply may also carry a run's outputs (32 MiB, base64: 4/3 of it) beside its captures. Only
# the server reads replies, from root; the launcher reads requests, and they stay under MAX_FRAME.
MAX_REPLY_FRAME = 80 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ProtocolError(RuntimeError):
    """The peer broke the framing, sent too much, or did not finish a frame in time."""


class BadFrame(ProtocolError):
    """A whole frame arrived, but its body is refused: not UTF-8 JSON, nested too deep, not an object.

    The framing is intact (the length was honoured and every byte read), so the reader may
    answer with a refusal and read the next frame; any other ``ProtocolError`` ends the stream.
    """


def encode(message: dict[str, Any], *, max_frame: int = MAX_FRAME) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(body) > max_frame:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds {max_frame}")
    return _HEADER.pack(len(body)) + body


def send(sock: socket.socket, message: dict[str, Any], *, max_frame: int = MAX_FRAME) -> None:
    sock.sendall(encode(message, max_frame=max_frame))


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError("timed out inside a frame")
            sock.settimeout(left)
        try:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
        except TimeoutError:
            raise ProtocolError("timed out inside a frame") from None
        if not chunk:
            if buf:
                raise ProtocolError("connection closed inside a frame")
            return None
        buf += chunk
    return bytes(buf)


def recv(
    sock: socket.socket, *, first_byte_timeout: float | None, frame_timeout: float, max_frame: int = MAX_FRAME
) -> dict[str, Any] | None:
    """Read one frame; ``None`` on a clean end of stream.

    ``first_byte_timeout`` bounds the wait for a frame to start (``None``: wait); once a frame
    has started, the rest must arrive within ``frame_timeout`` seconds.
    """
    start_deadline = None if first_byte_timeout is None else time.monotonic() + first_byte_timeout
    sock.settimeout(first_byte_timeout)
    try:
        first = sock.recv(1)
    except TimeoutError:
        raise ProtocolError("no frame arrived in time") from None
    finally:
        sock.settimeout(None)
    if not first:
        return None
    deadline = time.monotonic() + frame_timeout
    if start_deadline is not None:
        deadline = max(deadline, start_deadline)
    rest = _recv_exact(sock, _HEADER.size - 1, deadline)
    if rest is None:
        raise ProtocolError("connection closed inside a frame header")
    (length,) = _HEADER.unpack(first + rest)
    if length > max_frame:
        raise ProtocolError(f"frame of {length} bytes exceeds {max_frame}")
    body = _recv_exact(sock, length, deadline) if length else b""
    if body is None:
        raise ProtocolError("connection closed inside a frame")
    sock.settimeout(None)
    try:
        # Depth-bounded before decoding: a frame nested 200,000 deep must be a refusal, not a
        # RecursionError in the root process that reads it.
        message = jsonbound.loads(body)
    except ValueError as exc:
        raise BadFrame(f"frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise BadFrame("frame is not a JSON object")
    return message
