"""Deeply nested JSON never reaches the decoder on the root side: a refusal, never a RecursionError.

The standard library's decoder recurses per level; 200,000 levels raise ``RecursionError``,
which no ``except ValueError`` catches, and in PID 1 that ends the appliance. ``jsonbound``
measures the depth first, without recursion. In process, no Docker; the appliance's own test
of the same frame is ``tests/appliance/test_broker_bounds.py``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp import brokerwire, declwire, jsonbound
from skill_mcp.grantrules import parse_rows
from skill_mcp_launcher.boot import _serve_one
from skill_mcp_launcher.broker import Broker
from tests.security.offline_broker import offline_broker

DEEP = 200_000


def _nested(depth: int, open_: str = "[", close: str = "]", core: str = "0") -> str:
    return open_ * depth + core + close * depth


@pytest.mark.parametrize(
    ("text", "limit", "within"),
    [
        ("0", 0, True),
        ("[]", 0, False),
        ("[]", 1, True),
        ("[[]]", 1, False),
        ('{"a": [1, {"b": []}]}', 4, True),
        ('{"a": [1, {"b": []}]}', 3, False),
        ('["[[[[[[[[", "{{{{{{{{{"]', 1, True),  # brackets inside strings never count
        ('["\\"[[[[", "\\\\", [[]]]', 3, True),  # escaped quotes and backslashes end strings where JSON does
        ('["\\"[[[[", "\\\\", [[]]]', 2, False),
        ("[]" * 1000, 1, True),  # many siblings are not depth
        ("[" * 5 + "]" * 5, 5, True),
        ("[" * 6 + "]" * 6, 5, False),
        ("[{[{[]}]}]", 5, True),
        ("[{[{[]}]}]", 4, False),
        ("]]]]]][[[[[[", 3, False),  # unbalanced: refused or not, the decoder stops at its first character
        ("]]]]]]][[[[[[", 6, True),
        ("[[[[]]]]]]][[[[", 3, False),  # what comes before the point the decoder stops at counts
        ('["unterminated [[[[[[', 1, True),  # the decoder stops at the string
        ('[[["\\', 2, False),
        ('"\\"\\"\\"' * 1000, 1, True),  # quotes and escapes cannot make the scan quadratic
        ("[[[[[[", 3, False),
    ],
)
def test_depth_within_table(text: str, limit: int, within: bool) -> None:
    assert jsonbound.depth_within(text, limit) is within


def test_depth_limit_holds_for_text_the_decoder_would_crash_on() -> None:
    for text in (_nested(DEEP), _nested(DEEP, '{"a":', "}", "1"), "[" * (32 * 1024 * 1024 // 2)):
        with pytest.raises(jsonbound.TooDeep):
            jsonbound.loads(text)
    # The positive control: the standard library itself fails on the first one.
    with pytest.raises(RecursionError):
        json.loads(_nested(DEEP))


# Strings full of brackets, quotes and backslashes: what a string holds must never count.
TRICKY = st.text(alphabet='[]{}"\\/ab\n\u00e9', max_size=8) | st.text(max_size=8)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY, inner, max_size=4),
    max_leaves=40,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(value=JSON, wrap=st.integers(0, 80), ascii_only=st.booleans())
def test_json_within_the_bound_decodes_the_same_and_deeper_is_refused(value: Any, wrap: int, ascii_only: bool) -> None:
    text = "[" * wrap + json.dumps(value, ensure_ascii=ascii_only) + "]" * wrap
    assert jsonbound.depth_within(text, _depth(value) + wrap)  # measured exactly ...
    assert not jsonbound.depth_within(text, _depth(value) + wrap - 1) or _depth(value) + wrap == 0  # ... both ways
    if _depth(value) + wrap <= jsonbound.MAX_DEPTH:
        assert jsonbound.loads(text) == json.loads(text)
    else:
        with pytest.raises(jsonbound.TooDeep):
            jsonbound.loads(text)


@given(text=st.text(alphabet='[]{}"\\,:0a ', max_size=200))
def test_any_text_is_decoded_or_refused_with_a_value_error(text: str) -> None:
    try:
        jsonbound.loads(text, limit=4)
    except ValueError:
        return  # TooDeep or JSONDecodeError: both are refusals


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _send_in_background(sock: socket.socket, data: bytes) -> threading.Thread:
    # A frame larger than the socket buffer: written by a thread while the test reads.
    def send() -> None:
        with contextlib.suppress(OSError):
            sock.sendall(data)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_broker_cannot_be_crashed_by_a_200000_deep_frame() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        sender = _send_in_background(ours, _frame(b'{"v":2,"id":1,"op":' + _nested(DEEP).encode() + b"}"))
        with pytest.raises(brokerwire.BadFrame):
            brokerwire.recv(theirs, first_byte_timeout=5, frame_timeout=30)
        sender.join(30)


def _broker() -> Broker:
    return offline_broker("test")


def test_broker_loop_step_refuses_a_deep_frame_and_answers_the_next_one() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        broker = _broker()
        sender = _send_in_background(ours, _frame(_nested(DEEP, '{"a":', "}", "1").encode()))
        assert _serve_one(broker, theirs) is True  # returns, never raises; the frame was whole
        sender.join(30)
        reply = brokerwire.recv(ours, first_byte_timeout=5, frame_timeout=5)
        assert reply is not None and reply["ok"] is False and reply["reason"] == "invalid-arguments"
        # The positive control: the same conversation goes on, and a hello is answered.
        brokerwire.send(ours, {"v": 2, "id": 7, "op": "hello"})
        assert _serve_one(broker, theirs) is True
        reply = brokerwire.recv(ours, first_byte_timeout=5, frame_timeout=5)
        assert reply is not None and reply["ok"] is True and reply["id"] == 7


def test_broker_loop_step_ends_the_conversation_on_a_broken_frame() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(struct.pack(">I", 100) + b"[[[")
        ours.shutdown(socket.SHUT_WR)
        assert _serve_one(_broker(), theirs) is False  # closed inside a frame: nothing to answer


class _Exploding(Broker):
    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        raise RecursionError("anything handle did not expect")


def test_broker_loop_step_refuses_when_handle_raises() -> None:
    broker = _Exploding(
        **{
            f: getattr(_broker(), f)
            for f in (
                "users",
                "reaper",
                "roots",
                "interpreters",
                "fence_ok",
                "fence_detail",
                "grants",
                "environ",
                "parse_user",
            )
        }
    )
    ours, theirs = socket.socketpair()
    with ours, theirs:
        brokerwire.send(ours, {"v": 2, "id": 3, "op": "hello"})
        assert _serve_one(broker, theirs) is True
        reply = brokerwire.recv(ours, first_byte_timeout=5, frame_timeout=5)
        assert reply is not None and reply["ok"] is False and reply["reason"] == "spawn-failed"


def test_declarations_helper_cannot_crash_the_broker_with_a_deep_document() -> None:
    with pytest.raises(declwire.DeclaredError):
        declwire.decode(('{"uid":1,"skills":' + _nested(DEEP) + "}").encode())
    found = declwire.decode(b'{"uid":1,"skills":[]}')  # the positive control
    assert (dict(found.skills), found.parsed_as) == ({}, 1)


def test_owner_grant_nested_deep_grants_nothing_and_does_not_crash() -> None:
    rows, errors, invalid = parse_rows(_nested(100_000))
    assert rows == () and invalid and errors
    rows, errors, invalid = parse_rows('[{"skill": "s", "script": "a.py"}]')  # the positive control
    assert len(rows) == 1 and not invalid and errors == ()
