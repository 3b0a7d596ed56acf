"""The broker protocol and the server's broker client, over a real socketpair. No Docker.

The peer is a thread speaking the launcher's framing (``skill_mcp.brokerwire``) the
way the launcher does; what is under test is the server side's handling of each answer.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from skill_mcp import brokerwire as protocol
from skill_mcp.errors import SkillMcpError
from skill_mcp.runner.spawn_broker import BrokerSpawner
from skill_mcp.runner.types import RunPlan

PLAN = RunPlan(
    skill="s",
    script="scripts/a.py",
    interpreter="python",
    interpreter_path="/usr/bin/python3.11",
    argv=("/usr/bin/python3.11", "/skills/s/scripts/a.py", "--flag"),
    cwd="/skills/s",
    env={"LANG": "C", "API_KEY": "secret"},
    timeout_s=5,
    egress=("api.example",),
)
RESULT = {
    "status": "ok",
    "exit_code": 0,
    "signal": None,
    "stdout": "hi\n",
    "stderr": "",
    "truncated_stdout": False,
    "truncated_stderr": False,
    "dropped_bytes": 0,
    "duration_ms": 7,
    "notes": [],
}


def _peer(answer: Callable[[dict[str, Any]], dict[str, Any] | None]) -> tuple[BrokerSpawner, threading.Thread]:
    ours, theirs = socket.socketpair()

    def serve() -> None:
        with theirs:
            while (message := protocol.recv(theirs, first_byte_timeout=10, frame_timeout=10)) is not None:
                reply = answer(message)
                if reply is None:
                    return
                protocol.send(theirs, reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return BrokerSpawner(sock=ours), thread


def test_request_asks_by_name_and_result_comes_back() -> None:
    seen: list[dict[str, Any]] = []

    def answer(m: dict[str, Any]) -> dict[str, Any]:
        seen.append(m)
        return {"id": m["id"], "ok": True, "result": RESULT}

    spawner, thread = _peer(answer)
    result = anyio.run(spawner.run, PLAN)
    assert result.stdout == "hi\n" and result.status == "ok"
    # What to run and what the preview showed, by name; never argv, cwd, a path or a value.
    assert seen[0]["run"] == {
        "skill": "s",
        "script": "scripts/a.py",
        "args": ["--flag"],
        "timeout_s": 5,
        "interpreter": "python",
        "env": ["API_KEY", "LANG"],
        "egress": ["api.example"],
    }
    assert "secret" not in repr(seen[0])
    spawner.sock.close()
    thread.join(5)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("fence-unavailable", "fence-unavailable"),
        ("outside-skill", "outside-skill"),
        ("no-such-reason", "spawn-failed"),
    ],
)
def test_broker_refusal_keeps_its_reason(reason: str, expected: str) -> None:
    spawner, _ = _peer(lambda m: {"id": m["id"], "ok": False, "reason": reason, "detail": "no"})
    with pytest.raises(SkillMcpError) as info:
        anyio.run(spawner.run, PLAN)
    assert str(info.value.reason) == expected
    spawner.sock.close()


def test_closed_broker_marks_the_spawner_broken() -> None:
    spawner, _ = _peer(lambda m: None)
    for _ in range(2):
        with pytest.raises(SkillMcpError) as info:
            anyio.run(spawner.run, PLAN)
        assert str(info.value.reason) == "spawn-failed"
    spawner.sock.close()


def test_reply_for_another_request_is_refused() -> None:
    spawner, _ = _peer(lambda m: {"id": m["id"] + 100, "ok": True, "result": RESULT})
    with pytest.raises(SkillMcpError):
        anyio.run(spawner.run, PLAN)
    spawner.sock.close()


@pytest.mark.slow
def test_oversized_or_truncated_frames_are_protocol_errors() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack(">I", protocol.MAX_FRAME + 1))
        with pytest.raises(protocol.ProtocolError):
            protocol.recv(b, first_byte_timeout=5, frame_timeout=5)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack(">I", 10) + b"{}")
        with pytest.raises(protocol.ProtocolError):
            protocol.recv(b, first_byte_timeout=5, frame_timeout=0.2)
    # Positive control: a whole frame is read back intact.
    a, b = socket.socketpair()
    with a, b:
        protocol.send(a, {"x": "é" * 3})
        assert protocol.recv(b, first_byte_timeout=5, frame_timeout=5) == {"x": "é" * 3}
