"""The first answers given before the SDK is imported (``skill-mcp serve`` over stdio).

Importing the SDK (its pydantic protocol models, the low-level server with the HTTP stacks it
imports at module level) is most of a start. Neither ``initialize`` nor ``tools/list`` depends
on anything that import builds, and neither do ``skill_list`` and ``skill_search``, so
``server.serve_stdio_early`` imports and assembles the server in a worker thread while the main
thread answers here: the handshake with the SDK's own answers frozen in ``early_answers``
(``tests/surfaces/test_early_handshake.py`` holds them byte for byte equal to what the SDK
server answers), the two tools with their own handlers over the state the SDK server is then
composed with (``early_calls``; ``tests/surfaces/test_early_calls.py`` holds the bytes equal).

Only the plain path is answered here: an ``initialize`` whose params are exactly
``protocolVersion``, ``capabilities`` (the known ones, in their plain form) and ``clientInfo``
(``name``, ``version``, optional ``title``, ``description``, ``websiteUrl``; strings), then ``notifications/initialized``, then
``tools/list`` without params and plain ``tools/call`` of ``skill_list`` and ``skill_search``
(``early_calls.EarlyCalls.answer``). The first line that is anything else (not JSON, another
method, a cursor, a repeated id, ...) ends this phase unread, as does the server being ready
or end of input; from then on the SDK server serves.

The handover keeps the session exactly what it would have been. The SDK server is first given
the handshake lines read here (``Handover.prefix``), so it sees the same ``initialize`` and
``notifications/initialized`` and commits the same state; the answers it gives to the
requests already answered are dropped on the way out (``Handover.answered``; a dropped answer
that differs from the one sent is logged as an error). The tool calls answered here are not
in the prefix: replaying them would compute each answer again (a 10,000-skill walk costs its
whole CPU twice) only to drop it. Leaving them out changes nothing the SDK server holds for the
session: a ``tools/call`` of these two tools commits no session state (no subscription, no log
level, no negotiated value; once answered it is not in flight), and what it builds (the scan,
the runner's facts, the search index) lives in the shared provider, script states and search
state, which the SDK server reads as it finds them. Stdlib only: importing this must not
import the SDK.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import select
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skill_mcp.surfaces.stdio import early_answers as frozen

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.config import Settings
    from skill_mcp.surfaces.stdio.early_calls import EarlyCalls

MAX_EARLY_LINE = 64 * 1024  # a longer line is not a plain handshake: the SDK server reads it
_CHUNK = 64 * 1024
_INIT_KEYS = frozenset({"protocolVersion", "capabilities", "clientInfo"})
_OPEN_CAPS = frozenset({"experimental", "extensions"})  # dict[str, dict[str, Any]]
_NESTED_CAPS = frozenset({"sampling", "elicitation", "tasks"})  # objects of objects, all the way down
_CLIENT_INFO = frozenset({"name", "version", "title", "description", "websiteUrl"})  # strings; icons: not plain
_MESSAGE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})


@dataclass(slots=True)
class Handover:
    """What the early phase hands the SDK server: the bytes read and the answers already sent."""

    prefix: bytes = b""  # what the SDK server reads first: every byte read, less the calls answered
    answered: dict[int | str, str] = field(default_factory=dict)  # replayed request id -> frame sent
    calls: int = 0  # tools/call answered here (not replayed)


def root_notes(settings: Settings) -> str:
    """The roots that serve nothing, in a sentence the model can repeat to the person: a server
    started with a mistyped root otherwise looks like one with no skills (the tail of
    ``instructions``)."""
    from skill_mcp.catalog.roots import probe_roots

    notes = [f"{n.path}: {n.detail}" for n in probe_roots(settings)]
    if not notes:
        return ""
    return " Tell the user that the server's configuration needs fixing; " + "; ".join(notes) + "."


def eligible(settings: Settings, *, stdin_is_terminal: bool) -> bool:
    """Whether the frozen answers are this server's: the full tool set, a static catalog, no
    telemetry (its spans cover the handshake) and no appliance broker (asked before anything is
    served)."""
    from skill_mcp.telemetry_config import wanted

    return (
        settings.enabled_tools is None
        and settings.compat is None
        and not settings.watch
        and settings.broker_fd is None
        and not stdin_is_terminal
        and not wanted(settings.environ)
    )


def _frame(rid: int | str, result_json: str) -> str:
    return '{"jsonrpc":"2.0","id":' + json.dumps(rid) + ',"result":' + result_json + "}\n"


def _not_json(constant: str) -> Any:
    """``NaN`` and ``Infinity`` are Python's extension of JSON, not JSON: the SDK's parser refuses them."""
    raise ValueError(f"{constant} is not JSON")


def _plain_id(message: dict[str, Any]) -> int | str | None:
    rid = message.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    return rid


def _objects_all_the_way(value: Any) -> bool:
    return isinstance(value, dict) and all(_objects_all_the_way(v) for v in value.values())


def _plain_capability(name: str, value: Any) -> bool:
    """A client capability exactly as the SDK's ``ClientCapabilities`` reads it, in the plain
    form (anything else, even what the SDK would accept, is left to the SDK server)."""
    if not isinstance(value, dict):
        return False
    if name == "roots":
        return set(value) <= {"listChanged"} and all(isinstance(v, bool) for v in value.values())
    if name in _OPEN_CAPS:
        return all(isinstance(v, dict) for v in value.values())
    return name in _NESTED_CAPS and _objects_all_the_way(value)


def _plain_initialize(params: Any) -> str | None:
    """The requested protocol version when ``params`` is a plain, valid ``initialize``."""
    if not isinstance(params, dict) or set(params) != _INIT_KEYS:
        return None
    version, caps, info = params["protocolVersion"], params["capabilities"], params["clientInfo"]
    if not isinstance(version, str) or not isinstance(caps, dict) or not isinstance(info, dict):
        return None
    if not all(_plain_capability(name, value) for name, value in caps.items()):
        return None
    if not {"name", "version"} <= set(info) <= _CLIENT_INFO or not all(isinstance(v, str) for v in info.values()):
        return None
    return version


class EarlyHandshake:
    """The state of the early phase: which plain steps of the handshake have been answered."""

    def __init__(self, instructions_tail: str, server_version: str, calls: EarlyCalls | None = None) -> None:
        self._tail = instructions_tail
        self._version = server_version
        self._calls = calls  # None: no tools/call is answered here
        self.initialized = False  # initialize answered
        self.notified = False  # notifications/initialized read
        self.answered: dict[int | str, str] = {}  # every request answered here: id -> frame
        self.called: set[int | str] = set()  # the ids of those that were tools/call (not replayed)
        self.replay = True  # whether the line last answered is given to the SDK server

    def initialize_result(self, requested: str) -> str:
        negotiated = requested if requested in frozen.HANDSHAKE_VERSIONS else frozen.LATEST_HANDSHAKE_VERSION
        result = {
            "capabilities": frozen.CAPABILITIES,
            "instructions": frozen.INSTRUCTIONS + self._tail,
            "protocolVersion": negotiated,
            "serverInfo": {"name": frozen.SERVER_NAME, "version": self._version},
        }
        return json.dumps(result, ensure_ascii=False, separators=(",", ":"))

    def answer(self, line: bytes) -> str | None:
        """The frame to send for ``line`` ("" for a notification), or None: the early phase ends."""
        try:
            message = json.loads(line, parse_constant=_not_json)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not set(message) <= _MESSAGE_KEYS:
            return None
        method = message.get("method")
        if method == "notifications/initialized":
            if not self.initialized or self.notified or "id" in message or message.get("params", {}) != {}:
                return None
            self.notified = True
            self.replay = True
            return ""
        rid = _plain_id(message)
        if rid is None or rid in self.answered:
            return None
        if method == "initialize" and not self.initialized:
            requested = _plain_initialize(message.get("params"))
            if requested is None:
                return None
            frame = _frame(rid, self.initialize_result(requested))
            self.initialized = True
        elif method == "tools/list" and self.notified and message.get("params", {}) == {}:
            frame = _frame(rid, frozen.TOOLS_LIST)
        elif method == "tools/call" and self.notified and self._calls is not None:
            result = self._calls.answer(message.get("params"))
            if result is None:
                return None
            frame = _frame(rid, result)
            self.called.add(rid)
        else:
            return None
        self.answered[rid] = frame
        self.replay = rid not in self.called
        return frame

    def forget(self, rid: int | str) -> None:
        """``rid`` was not answered after all (its frame could not be written)."""
        self.answered.pop(rid, None)
        self.called.discard(rid)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


@contextmanager
def diverted() -> Iterator[tuple[int, int]]:
    """The wire on private descriptors while the early phase lasts, as ``stdio.run_stdio`` has
    it while serving: fd 0 points at /dev/null and fd 1 at stderr (or /dev/null without one),
    so the loading thread can neither read protocol bytes nor write into the protocol. Both are
    put back on exit, for ``run_stdio`` to claim."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except BaseException:
        os.close(wire_in)
        raise
    try:
        null = os.open(os.devnull, os.O_RDWR)
        try:
            os.dup2(null, 0)
            try:
                os.dup2(2, 1)
            except OSError as err:
                if err.errno != errno.EBADF:
                    raise
                os.dup2(null, 1)
        finally:
            os.close(null)
        yield wire_in, wire_out
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


def answer_early(state: EarlyHandshake, fd_in: int, fd_out: int, wake: int) -> Handover:
    """Answer plain lines from ``fd_in`` on ``fd_out`` until ``wake`` is readable (the SDK
    server is ready), a line is not plain, or input ends; return what the SDK server needs."""
    buf = bytearray()
    done = 0  # bytes of buf answered here
    replay = bytearray()  # the answered lines the SDK server reads again (not the tool calls)
    while True:
        try:
            ready = select.select([fd_in, wake], [], [])[0]
        except InterruptedError:  # pragma: no cover - PEP 475 retries select
            continue
        if wake in ready:
            break
        try:
            chunk = os.read(fd_in, _CHUNK)
        except BlockingIOError:
            continue
        except OSError as err:
            if err.errno == errno.EINTR:  # pragma: no cover
                continue
            break  # the SDK server's reader meets the same error and treats it as end of input
        if not chunk:
            break
        buf += chunk
        stop = False
        while not stop:
            newline = buf.find(b"\n", done)
            if newline < 0:
                stop = len(buf) - done > MAX_EARLY_LINE
                break
            line = bytes(buf[done : newline + 1])
            frame = state.answer(line)
            if frame is None:
                stop = True
                break
            if frame:
                try:
                    _write_all(fd_out, frame.encode())
                except OSError:
                    # The client is gone (EPIPE, ...): not answered after all; the SDK server's
                    # writer meets the same error and ends the session as it always does.
                    state.forget(next(reversed(state.answered)))
                    stop = True
                    break
            done = newline + 1
            if state.replay:
                replay += line
        if stop:
            break
    answered = {rid: frame for rid, frame in state.answered.items() if rid not in state.called}
    return Handover(prefix=bytes(replay) + bytes(buf[done:]), answered=answered, calls=len(state.called))
