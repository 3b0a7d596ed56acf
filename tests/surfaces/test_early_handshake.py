"""The handshake answered before the SDK is imported is the SDK server's own, byte for byte.

``skill_mcp.surfaces.stdio.early`` answers a plain ``initialize`` and ``tools/list`` from the frozen
``early_answers`` while the SDK loads. Here the real console script answers the same requests
twice: once on the early path, and once with a ``ping`` first (not a handshake line, so the SDK
server answers everything). Every answer must be the same bytes, for each protocol version the
SDK negotiates, and the frozen constants must be the SDK's. When the SDK, a tool's description
or a schema changes, these fail; regenerate with

    python -m tests.surfaces.test_early_handshake --write

then read the diff of ``src/skill_mcp/surfaces/stdio/early_answers.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from skill_mcp.surfaces.stdio import early_answers
from skill_mcp.surfaces.stdio.early import EarlyHandshake
from tests.serve import exchange

FROZEN = Path(early_answers.__file__)
PING = {"jsonrpc": "2.0", "id": "p", "method": "ping"}


def _initialize(version: str, rid: int | str = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "early", "version": "0"},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _exchange(root: Path, messages: list[dict[str, Any]], env: dict[str, str] | None = None) -> list[bytes]:
    """Every stdout line ``skill-mcp serve`` writes for ``messages`` (stdin then closed)."""
    return _run(root, messages, env)[0]


def _run(root: Path, messages: list[dict[str, Any]], env: dict[str, str] | None = None) -> tuple[list[bytes], str]:
    full = {"SKILL_MCP_LOG": "warning", "SKILL_MCP_CACHE": "off", **(env or {})}
    return exchange(root, [json.dumps(m).encode() + b"\n" for m in messages], full)


def _result_json(frame: bytes, rid: int | str) -> str:
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b',"result":'
    assert frame.startswith(head) and frame.endswith(b"}\n"), frame[:200]
    return frame[len(head) : -2].decode()


def _skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills" / "alpha"
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: alpha\ndescription: Alpha.\n---\nBody.\n", encoding="utf-8")
    return root.parent


def sdk_answers(root: Path) -> dict[str, Any]:
    """The constants ``early_answers`` must hold, read from the SDK server's own answers."""
    frames = _exchange(root, [PING, _initialize(LATEST_HANDSHAKE_VERSION), INITIALIZED, TOOLS_LIST])
    init = json.loads(_result_json(frames[1], 1))
    return {
        "CAPABILITIES": init["capabilities"],
        "INSTRUCTIONS": init["instructions"],
        "SERVER_NAME": init["serverInfo"]["name"],
        "HANDSHAKE_VERSIONS": tuple(HANDSHAKE_PROTOCOL_VERSIONS),
        "LATEST_HANDSHAKE_VERSION": LATEST_HANDSHAKE_VERSION,
        "TOOLS_LIST": _result_json(frames[2], 2),
    }


@pytest.mark.slow
@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, "2026-07-28", "1999-01-01"])
def test_the_early_handshake_is_the_sdk_servers_byte_for_byte(tmp_path: Path, version: str) -> None:
    root = _skills(tmp_path)
    handshake = [_initialize(version), INITIALIZED, TOOLS_LIST]
    early = _exchange(root, handshake)
    sdk = _exchange(root, [PING, *handshake])
    assert json.loads(sdk[0])["id"] == "p"
    assert early == sdk[1:]
    assert len(early) == 2


RICH_CAPABILITIES = {
    "roots": {"listChanged": True},
    "sampling": {"context": {}, "tools": {}},
    "elicitation": {"form": {}, "url": {}},
    "experimental": {"x": {"y": 1}},
    "tasks": {"requests": {"sampling": {"createMessage": {}}}},
    "extensions": {"e": {}},
}


def test_a_rich_plain_initialize_is_answered_early_as_the_sdk_server_answers_it(tmp_path: Path) -> None:
    root = _skills(tmp_path)
    init = _initialize(LATEST_HANDSHAKE_VERSION)
    init["params"].update(
        capabilities=RICH_CAPABILITIES,
        clientInfo={"name": "n", "version": "1", "title": "T", "description": "d", "websiteUrl": "https://example.org"},
    )
    assert EarlyHandshake("", "0").answer(json.dumps(init).encode())  # taken by the early path
    handshake = [init, INITIALIZED, TOOLS_LIST]
    assert _exchange(root, handshake) == _exchange(root, [PING, *handshake])[1:]


def test_the_root_notes_are_appended_as_the_sdk_server_appends_them(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    handshake = [_initialize(LATEST_HANDSHAKE_VERSION), INITIALIZED, TOOLS_LIST]
    early = _exchange(missing, handshake)
    assert early == _exchange(missing, [PING, *handshake])[1:]
    assert "needs fixing" in json.loads(early[0])["result"]["instructions"]  # the control: a note is there


def test_without_elicitation_confirmation_the_answers_are_the_same(tmp_path: Path) -> None:
    root = _skills(tmp_path)
    handshake = [_initialize(LATEST_HANDSHAKE_VERSION), INITIALIZED, TOOLS_LIST]
    env = {"MCP_CONFIRM_ELICITATION": "off"}
    assert _exchange(root, handshake, env) == _exchange(root, [PING, *handshake], env)[1:]


def test_the_frozen_answers_are_the_sdk_servers(tmp_path: Path) -> None:
    for name, value in sdk_answers(_skills(tmp_path)).items():
        assert getattr(early_answers, name) == value, f"early_answers.{name} differs from the SDK server's: regenerate"


def test_a_session_goes_on_after_the_early_handshake(tmp_path: Path) -> None:
    # The SDK server got the replayed handshake: a tool call answers, and no answer is repeated.
    root = _skills(tmp_path)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "skill_list", "arguments": {}}}
    frames, err = _run(root, [_initialize(LATEST_HANDSHAKE_VERSION), INITIALIZED, TOOLS_LIST, call])
    assert [json.loads(f)["id"] for f in frames] == [1, 2, 3]
    assert "differed" not in err  # the SDK server's own answers to the replayed requests were the same
    assert json.loads(frames[2])["result"]["structuredContent"]["total"] == 1


@pytest.mark.parametrize(
    "line",
    [
        {**_initialize(LATEST_HANDSHAKE_VERSION), "params": {"protocolVersion": LATEST_HANDSHAKE_VERSION}},
        {**_initialize(LATEST_HANDSHAKE_VERSION), "params": {**_initialize("x")["params"], "_meta": {}}},
        {
            **_initialize(LATEST_HANDSHAKE_VERSION),
            "params": {**_initialize("x")["params"], "capabilities": {"roots": 1}},
        },
        {
            **_initialize(LATEST_HANDSHAKE_VERSION),
            "params": {**_initialize("x")["params"], "capabilities": {"roots": {"listChanged": "yes"}}},
        },
        {
            **_initialize(LATEST_HANDSHAKE_VERSION),
            "params": {**_initialize("x")["params"], "capabilities": {"sampling": {"context": 1}}},
        },
        {
            **_initialize(LATEST_HANDSHAKE_VERSION),
            "params": {**_initialize("x")["params"], "capabilities": {"future": {}}},
        },
        {
            **_initialize(LATEST_HANDSHAKE_VERSION),
            "params": {**_initialize("x")["params"], "clientInfo": {"name": "n"}},
        },
        {
            **_initialize(LATEST_HANDSHAKE_VERSION),
            "params": {**_initialize("x")["params"], "clientInfo": {"name": "n", "version": "1", "icons": []}},
        },
        {**_initialize(LATEST_HANDSHAKE_VERSION), "id": True},
        {**_initialize(LATEST_HANDSHAKE_VERSION), "id": None},
        {**_initialize(LATEST_HANDSHAKE_VERSION), "extra": 1},
        {**_initialize(LATEST_HANDSHAKE_VERSION), "jsonrpc": "1.0"},
        PING,
    ],
)
def test_anything_but_a_plain_initialize_is_left_to_the_sdk_server(line: dict[str, Any]) -> None:
    state = EarlyHandshake("", "0")
    assert state.answer(json.dumps(line).encode() + b"\n") is None
    assert state.answer(b"not json\n") is None


def test_tools_list_is_answered_early_only_after_the_plain_handshake() -> None:
    state = EarlyHandshake("", "0")
    line = json.dumps(TOOLS_LIST).encode()
    assert state.answer(line) is None  # before initialize
    assert state.answer(json.dumps(_initialize(LATEST_HANDSHAKE_VERSION)).encode())
    assert state.answer(line) is None  # before notifications/initialized
    assert state.answer(json.dumps(INITIALIZED).encode()) == ""
    assert state.answer(json.dumps({**TOOLS_LIST, "params": {"cursor": "x"}}).encode()) is None
    assert state.answer(json.dumps({**TOOLS_LIST, "id": 1}).encode()) is None  # an id already answered
    assert state.answer(line)  # the positive control


def _write(answers: dict[str, Any]) -> None:
    body = [
        '"""The SDK server\'s own handshake answers, frozen for ``surfaces.stdio.early`` (generated).',
        "",
        "Written by ``python -m tests.surfaces.test_early_handshake --write``, which reads them from the",
        "real server; that test file holds them equal. Do not edit by hand.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
    ]
    for name, value in answers.items():
        if name == "CAPABILITIES":
            body.append(f"{name}: dict[str, Any] = {value!r}")
        elif name == "HANDSHAKE_VERSIONS":
            body.append(f"{name}: tuple[str, ...] = {value!r}")
        else:
            body.append(f"{name} = {value!r}")
    FROZEN.write_text("\n".join(body) + "\n", encoding="utf-8")


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.surfaces.test_early_handshake --write")
    with tempfile.TemporaryDirectory() as tmp:
        _write(sdk_answers(_skills(Path(tmp))))
