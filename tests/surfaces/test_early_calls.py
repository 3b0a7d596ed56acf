"""``skill_list`` and ``skill_search`` answered before the SDK is imported are the SDK server's, byte for byte.

``skill_mcp.surfaces.stdio.early_calls`` answers a plain ``tools/call`` of the two tools while
the SDK loads. Here the real console script answers the same requests twice: once on the
early path (its debug log says how many calls it answered there, so the comparison cannot pass
with the SDK server answering both), and once with a ``ping`` first (not a handshake line, so
the SDK server answers everything). The set covers the first page, cursor pages, ``limit``, a
root with problems and a declared script, a refusal (a bad cursor), a search with hits, one
with none, and a first search answered from the partial index (two phases, docs/search.md).

In process, ``wire_result`` is held to the SDK's own outbound shaping (the per-version sieve
and check, ``serialize_server_result``, then pydantic's JSON) over generated results, with a
planted-bug control; and the hand-over is held to replay no answered call.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from skill_mcp.surfaces.paging import encode_cursor
from skill_mcp.surfaces.stdio import early_calls
from skill_mcp.surfaces.stdio.early import EarlyHandshake, answer_early
from tests.integration.harness import build_tree
from tests.serve import exchange

PING = {"jsonrpc": "2.0", "id": "p", "method": "ping"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _initialize(version: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "early-calls", "version": "0"},
        },
    }


def _call(rid: int, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def _run(root: Path, messages: list[dict[str, Any]]) -> tuple[list[bytes], str]:
    env = {"SKILL_MCP_LOG": "debug", "SKILL_MCP_CACHE": "off", "MCP_CONFIRM_ELICITATION": "off"}
    return exchange(root, [json.dumps(m).encode() + b"\n" for m in messages], env)


def _early_calls_answered(stderr: str) -> int:
    for row in stderr.splitlines():
        if '"early-handover"' in row:
            return int(json.loads(row)["calls"])
    raise AssertionError("no early-handover line: the early path did not run")


def _both(root: Path, version: str, calls: list[dict[str, Any]]) -> tuple[list[bytes], list[bytes]]:
    """(early, sdk): the frames for ``calls`` after the handshake, answered both ways, in the
    order of the calls (the SDK server runs calls concurrently: it may finish them in another)."""
    handshake = [_initialize(version), INITIALIZED]
    early, err = _run(root, [*handshake, *calls])
    assert _early_calls_answered(err) == len(calls)  # every call was answered on the early path
    sdk, sdk_err = _run(root, [PING, *handshake, *calls])
    assert json.loads(sdk[0])["id"] == "p"
    assert _early_calls_answered(sdk_err) == 0  # the control: here the SDK server answered everything
    order = {c["id"]: i for i, c in enumerate(calls)}
    return early[1:], sorted(sdk[2:], key=lambda f: order[json.loads(f)["id"]])


def _small(tmp_path: Path) -> Path:
    root = build_tree(tmp_path / "skills")  # problems (a misnamed and a broken skill), a declared script
    for i in range(6):
        skill = root / f"extra-{i}"
        skill.mkdir()
        (skill / "SKILL.md").write_text(
            f'---\nname: extra-{i}\ndescription: Extra {i} — écrit des rapports \u2028 "quoted".\n---\nBody {i}.\n',
            encoding="utf-8",
        )
    return root


LIST_AND_SEARCH = [
    _call(10, "skill_list"),
    _call(11, "skill_list", {}),
    _call(12, "skill_list", {"limit": 2}),
    _call(13, "skill_list", {"cursor": encode_cursor("skill_list", 2)}),
    _call(14, "skill_list", {"cursor": encode_cursor("skill_list", 4), "limit": 3}),
    _call(15, "skill_list", {"cursor": "not-a-cursor"}),  # a refusal
    _call(16, "skill_search", {"query": "reports"}),  # hits
    _call(17, "skill_search", {"query": "zzqx vvkk", "limit": 5}),  # none
    _call(18, "skill_search", {"query": "écrit rapports", "limit": 1}),
]


@pytest.mark.parametrize("version", [LATEST_HANDSHAKE_VERSION])
def test_list_and_search_early_are_the_sdk_servers_byte_for_byte(tmp_path: Path, version: str) -> None:
    early, sdk = _both(_small(tmp_path), version, LIST_AND_SEARCH)
    assert early == sdk
    answers = [json.loads(f)["result"] for f in early]
    assert answers[0]["structuredContent"]["problems"]  # the root has problems, and they are listed
    assert answers[5]["isError"] and answers[5]["structuredContent"]["reason"] == "invalid-arguments"
    assert answers[6]["structuredContent"]["count"] >= 1 and answers[7]["structuredContent"]["count"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("version", [v for v in HANDSHAKE_PROTOCOL_VERSIONS if v != LATEST_HANDSHAKE_VERSION])
def test_list_and_search_early_are_the_sdk_servers_in_every_handshake_version(tmp_path: Path, version: str) -> None:
    early, sdk = _both(_small(tmp_path), version, LIST_AND_SEARCH)
    assert early == sdk


def test_a_first_search_from_the_partial_index_is_the_sdk_servers(tmp_path: Path) -> None:
    root = tmp_path / "many"
    for i in range(130):  # above the two-phase threshold: the first search answers from the short fields
        skill = root / f"tool-{i:03d}"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: tool-{i:03d}\ndescription: Tool {i} converts {'pdf' if i % 3 else 'csv'} files.\n---\n"
            f"Body of tool {i}.\n",
            encoding="utf-8",
        )
    early, sdk = _both(root, LATEST_HANDSHAKE_VERSION, [_call(20, "skill_search", {"query": "convert pdf"})])
    assert early == sdk
    assert json.loads(early[0])["result"]["structuredContent"]["coverage"] == "partial"


# In process: the wire form against the SDK's own outbound shaping.

_text = st.text(st.characters(codec="utf-8"), max_size=20)
_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | _text
_json = st.recursive(
    _leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4), max_leaves=12
)


def _sdk_wire(text: str, structured: dict[str, Any], is_error: bool, version: str) -> str:
    import mcp_types as types
    from mcp.server.runner import _dump_result
    from mcp_types import methods
    from pydantic_core import to_json

    result = types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured, is_error=is_error
    )
    return to_json(methods.serialize_server_result("tools/call", version, _dump_result(result))).decode()


@given(text=_text, structured=st.dictionaries(_text, _json, max_size=5), is_error=st.booleans())
def test_the_wire_result_is_what_the_sdk_writes(text: str, structured: dict[str, Any], is_error: bool) -> None:
    try:
        ours = early_calls.wire_result(text, structured, is_error=is_error)
    except early_calls.NotPlain:
        assume(False)
        return
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        assert ours == _sdk_wire(text, structured, is_error, version)


def test_floats_the_sdk_writes_otherwise_are_not_answered_early() -> None:
    # Python writes 1e-06, the SDK 1e-6: such a result goes to the SDK server.
    with pytest.raises(early_calls.NotPlain):
        early_calls.wire_result("t", {"score": 1e-06}, is_error=False)
    with pytest.raises(early_calls.NotPlain):
        early_calls.wire_result("t", {"s": "\ud800"}, is_error=False)  # not UTF-8
    assert early_calls.wire_result("t", {"score": 0.000123}, is_error=False) == _sdk_wire(
        "t", {"score": 0.000123}, False, LATEST_HANDSHAKE_VERSION
    )
    for value in (1e16, -2.5e-07, [{"deep": [1e300]}], float("nan"), float("inf")):
        with pytest.raises(early_calls.NotPlain):
            early_calls.wire_result("t", {"v": value}, is_error=False)
    # The same characters inside a string are sent to the SDK server too: slower, never different.
    with pytest.raises(early_calls.NotPlain):
        early_calls.wire_result("t", {"d": "a step of 1e-06"}, is_error=False)
    assert early_calls.wire_result("t", {"d": "e-mail 1 e-2", "n": 12.5}, is_error=False) == _sdk_wire(
        "t", {"d": "e-mail 1 e-2", "n": 12.5}, False, LATEST_HANDSHAKE_VERSION
    )


@given(st.text(alphabet='09e+-a"', max_size=40))
def test_the_exponent_check_is_the_regex(text: str) -> None:
    # has_exponent finds the EXPONENT pattern from each "e-" and "e+", not by a regex scan.
    assert early_calls.has_exponent(text) == (early_calls.EXPONENT.search(text) is not None)


def test_the_exponent_check_finds_it_at_either_end_and_after_near_misses() -> None:
    for text in ("1e-0", "1e+9 tail", "x" * 1000 + "7e-1", "e-1 re-run 1e- 1e+x e+5 2e-3"):
        assert early_calls.has_exponent(text)
    for text in ("", "e-1", "1e-", "re-run", "1e-x 2e+ e+5", "1E-5"):
        assert not early_calls.has_exponent(text)


def test_a_planted_difference_is_caught() -> None:
    # The negative control: the same result written with ASCII escapes, or the keys in another
    # order, is not what the SDK writes.
    out = {"d": "é"}
    sdk = _sdk_wire("é", out, False, LATEST_HANDSHAKE_VERSION)
    result = {"content": [{"text": "é", "type": "text"}], "isError": False, "structuredContent": out}
    assert json.dumps(result, separators=(",", ":")) != sdk
    assert json.dumps(dict(reversed(list(result.items()))), ensure_ascii=False, separators=(",", ":")) != sdk
    assert early_calls.wire_result("é", out, is_error=False) == sdk


class _Calls:
    """A stand-in for ``EarlyCalls``: answers a call named ``yes``, leaves anything else."""

    def answer(self, params: Any) -> str | None:
        return '{"x":1}' if isinstance(params, dict) and params.get("name") == "yes" else None


def _lines(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def test_answered_calls_are_not_replayed_to_the_sdk_server() -> None:
    init, later = _initialize(LATEST_HANDSHAKE_VERSION), _call(4, "no")
    tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    data = _lines(init, INITIALIZED, _call(3, "yes"), tools_list, _call(5, "yes"), later)
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    wake_r, wake_w = os.pipe()
    try:
        os.write(w_in, data)
        os.close(w_in)
        state = EarlyHandshake("", "0", _Calls())  # type: ignore[arg-type]
        handover = answer_early(state, r_in, w_out, wake_r)
        os.close(w_out)
        sent = [json.loads(f) for f in os.read(r_out, 1 << 20).splitlines()]
    finally:
        for fd in (r_in, r_out, wake_r, wake_w):
            os.close(fd)
    assert [m["id"] for m in sent] == [1, 3, 2, 5]
    # The handshake and tools/list are replayed (their SDK answers dropped and compared), the
    # calls answered here are not, and the first line not answered is handed over unread.
    assert handover.prefix == _lines(init, INITIALIZED, tools_list, later)
    assert set(handover.answered) == {1, 2}
    assert handover.calls == 2


def test_a_call_is_left_to_the_sdk_server_before_the_handshake_and_without_early_calls() -> None:
    line = json.dumps(_call(3, "yes")).encode()
    assert EarlyHandshake("", "0", _Calls()).answer(line) is None  # type: ignore[arg-type]  # before initialize
    state = EarlyHandshake("", "0")
    assert state.answer(json.dumps(_initialize(LATEST_HANDSHAKE_VERSION)).encode())
    assert state.answer(json.dumps(INITIALIZED).encode()) == ""
    assert state.answer(line) is None  # no EarlyCalls: no tools/call is answered
    with_calls = EarlyHandshake("", "0", _Calls())  # type: ignore[arg-type]
    assert with_calls.answer(json.dumps(_initialize(LATEST_HANDSHAKE_VERSION)).encode())
    assert with_calls.answer(json.dumps(INITIALIZED).encode()) == ""
    assert with_calls.answer(line)  # the positive control
    assert with_calls.answer(line) is None  # the same id again
    assert with_calls.answer(b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"yes","x":NaN}}') is None


def test_a_session_goes_on_after_early_calls_and_no_id_is_answered_twice(tmp_path: Path) -> None:
    tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    messages = [
        _initialize(LATEST_HANDSHAKE_VERSION),
        INITIALIZED,
        tools_list,
        _call(3, "skill_list", {"limit": 1}),
        _call(4, "skill_search", {"query": "reports"}),
        PING,  # not plain: the SDK server serves from here
        _call(6, "skill_list", {"limit": 1}),
    ]
    frames, err = _run(_small(tmp_path), messages)
    assert _early_calls_answered(err) == 2
    ids = [json.loads(f)["id"] for f in frames]
    assert sorted(ids, key=str) == sorted([1, 2, 3, 4, "p", 6], key=str)  # each once
    assert "differed" not in err  # the replayed handshake's answers were the SDK server's own
    after = json.loads(frames[ids.index(6)])["result"]["structuredContent"]
    assert after == json.loads(frames[ids.index(3)])["result"]["structuredContent"]
    # One catalog for both: the SDK server's answer after the hand-over scanned nothing again.
    assert err.count('"msg": "catalog built"') == 1


class _Frames:
    def __init__(self) -> None:
        self.written: list[str] = []

    async def write(self, text: str) -> None:
        self.written.append(text)

    async def flush(self) -> None:
        pass


def test_the_dropped_answer_check_still_logs_a_difference_in_what_is_replayed(caplog: pytest.LogCaptureFixture) -> None:
    import anyio

    from skill_mcp.surfaces.stdio.transport import _DropAnswered

    sent = '{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}'
    frames = _Frames()
    drop = _DropAnswered(frames, {2: sent, 1: '{"jsonrpc":"2.0","id":1,"result":{"x":1}}'})  # type: ignore[arg-type]

    async def write_all() -> None:
        await drop.write(sent)  # the same answer: dropped silently
        await drop.write('{"jsonrpc":"2.0","id":1,"result":{"x":2}}')  # a different one: dropped, logged
        await drop.write('{"jsonrpc":"2.0","id":6,"result":{}}')  # not answered early: written

    with caplog.at_level("ERROR", logger="skill_mcp.stdio"):
        anyio.run(write_all)
    assert frames.written == ['{"jsonrpc":"2.0","id":6,"result":{}}']
    assert [r.getMessage() for r in caplog.records] == ["the early handshake answer differed from the SDK server's"]
