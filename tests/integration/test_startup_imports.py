"""What ``skill-mcp serve`` imports before it has served anything (the first reply).

The real console script is started with ``PYTHONPROFILEIMPORTTIME=1``, so the interpreter
writes one stderr line per module the moment its ``import`` statement finishes (modules loaded
through ``importlib.import_module``, such as the command module ``cli.main`` dispatches to, are
not listed, but everything they import is). The test answers ``initialize``
and ``tools/list``, then sends a line that is not JSON: the server logs a warning for it on
stderr and answers ``-32700`` on stdout, so once that answer is read every import the
handshake caused is already on stderr, before the warning. Heavy modules must not be among
them; the same markers after ``skill_list``, ``skill_run`` and ``skill_search`` show each one
turning up when it is first needed, so the pin can fail. The scanner, the search and the runner
are the exception, by design: the SDK loading thread imports them before the SDK, during the
handshake but off its answering path (``load_gate.PRELOAD``), and they are pinned as imported
once the SDK server answers. No timing is asserted (pallets/click's ``test_imports`` idea, for a server).

The handshake itself is answered before the SDK is imported (``surfaces.stdio.early``; a worker thread
imports and composes the server meanwhile). That is pinned by making the SDK unimportable: with
``PYTHONPATH`` first naming packages ``mcp``, ``mcp_types``, ``pydantic``, ``pydantic_core`` and
``anyio`` whose import writes its name to a file and never returns, the server must still answer
``initialize`` and ``tools/list``, and ``tools/call`` of ``skill_list`` and ``skill_search``
(``surfaces.stdio.early_calls``); any of them imported on the answering path would hang it. A
``ping`` after them, which only the SDK server answers, is the control: it gets no answer.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import build_tree
from tests.serve import SKILL_MCP

WAIT_S = 60.0

# Not needed to answer initialize or tools/list: each is imported by the first request that uses it.
HEAVY_AT_START = (
    "argparse",  # a plain serve line is read without it (cli.main.serve_line)
    "jsonschema",  # argument validation, on the first arguments the quick check does not accept
    "yaml",  # frontmatter, on the first scan
    "skill_mcp.catalog.yaml12",
    "skill_mcp.surfaces.content",
    "skill_mcp.surfaces.http",
    "skill_mcp.catalog.watch",
    # Telemetry with nothing configured: the composition root asks telemetry_config (stdlib) and
    # stops there; the SDK, the exporters and our telemetry module are never imported.
    "skill_mcp.telemetry",
    "skill_mcp.telemetry_file",
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "prometheus_client",
    "google.protobuf",
)
# Imported during the handshake by the SDK loading thread, before the SDK and off the answering
# path (load_gate.PRELOAD): the scanner, the search and the catalog modules it stands on, and the
# runner, which the first skill_list or skill_search needs and would otherwise import itself.
# Whether they are in by the handshake's last answer depends on the threads' timing, so they are
# pinned once the SDK server answers. A module the loader names itself (``importlib``) is not on
# the import-time log, so the scanner and the runner are seen by what they import.
PRELOADED = (
    "skill_mcp.catalog.packs",  # by catalog.discover only
    "skill_mcp.search",
    "skill_mcp.models",
    "skill_mcp.catalog.files",
    "skill_mcp.catalog.frontmatter",
    "skill_mcp.runner.grants",  # by runner.core
    "skill_mcp.runner.interpreters",  # by runner.core
    "skill_mcp.runner.spawn_local",  # by runner.core
)
# The boot hardening must have happened before the first request (tests/fence/test_deferred.py).
NEEDED_AT_START = ("skill_mcp.runner.harden", "ctypes", "skill_mcp.proctools", "skill_mcp.surfaces.stdio")
# Not needed to answer a plain initialize and tools/list at all (surfaces.stdio.early): the SDK and what it stands on.
SDK_STACK = ("mcp", "mcp_types", "pydantic", "pydantic_core", "anyio")
HANG = "import os, time\nos.write(os.open({mark!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), b{name!r} + b'\\n')\ntime.sleep(3600)\n"


class Server:
    """``skill-mcp serve`` on pipes, with the modules it imported between two markers."""

    def __init__(self, root: Path, extra_env: dict[str, str] | None = None) -> None:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": "/tmp",
            "SKILL_MCP_LOG": "warning",
            "PYTHONPROFILEIMPORTTIME": "1",
            "MCP_CONFIRM_ELICITATION": "off",
            **(extra_env or {}),
        }
        self.proc = subprocess.Popen(
            [SKILL_MCP, "serve", "--skills-dir", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._next_id = 0
        self._out = b""
        self._err = b""

    def _read(self, stream: str, until: bytes) -> bytes:
        """Read ``stream`` ("out" or "err") up to ``until``, draining both pipes meanwhile: the import
        profile on stderr outgrows a pipe's buffer, and a server blocked writing it answers nothing."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        fds = {self.proc.stdout.fileno(): "out", self.proc.stderr.fileno(): "err"}
        bufs = {"out": self._out, "err": self._err}
        deadline = time.monotonic() + WAIT_S
        while until not in bufs[stream]:
            left = deadline - time.monotonic()
            ready = select.select(list(fds), [], [], left)[0] if left > 0 else []
            if not ready:
                raise TimeoutError(f"no {until!r} from the server within {WAIT_S:.0f} s")
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk and fds[fd] == stream:
                    raise EOFError(f"the server closed the pipe before {until!r}")
                bufs[fds[fd]] += chunk
        head, _, bufs[stream] = bufs[stream].partition(until)
        self._out, self._err = bufs["out"], bufs["err"]
        return head + until

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return dict(json.loads(self._read("out", b"\n")))

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def imported_so_far(self) -> set[str]:
        """Modules imported since the last call: send the marker line, read up to its warning."""
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdin.write(b"not json\n")
        self.proc.stdin.flush()
        assert json.loads(self._read("out", b"\n"))["error"]["code"] == -32700
        text = self._read("err", b"unparseable input line")
        names = set()
        for row in text.decode(errors="replace").splitlines():
            if row.startswith("import time:") and "|" in row:
                names.add(row.rsplit("|", 1)[1].strip())
        return names

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=WAIT_S)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(build_tree(tmp_path / "skills"))
    try:
        yield running
    finally:
        running.close()


def _handshake(server: Server) -> set[str]:
    init = server.request(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "imports", "version": "0"}},
    )
    assert init["result"]["serverInfo"]["name"] == "skill-mcp"
    server.notify("notifications/initialized")
    tools = server.request("tools/list")
    assert "skill_run" in {t["name"] for t in tools["result"]["tools"]}
    return server.imported_so_far()


def _loaded(names: set[str], wanted: tuple[str, ...]) -> list[str]:
    return [w for w in wanted if any(n == w or n.startswith(w + ".") for n in names)]


@pytest.mark.slow
def test_serve_answers_the_handshake_without_importing_heavy_modules(server: Server) -> None:
    at_start = _handshake(server)
    assert "skill_mcp.server" in at_start  # the pin reads this very server's imports
    assert _loaded(at_start, NEEDED_AT_START) == list(NEEDED_AT_START)
    assert _loaded(at_start, HEAVY_AT_START) == []


@pytest.mark.slow
def test_each_deferred_module_arrives_with_the_first_request_that_needs_it(server: Server) -> None:
    # The positive control: the same pin sees these modules once a request needs them.
    seen = _handshake(server)
    listed = server.request("tools/call", {"name": "skill_list", "arguments": {}})
    assert listed["result"]["structuredContent"]["total"] >= 1
    seen |= server.imported_so_far()
    scanned = ("yaml", "skill_mcp.models", "skill_mcp.catalog.files", "skill_mcp.runner.interpreters")
    assert _loaded(seen, scanned) == list(scanned)
    found = server.request("tools/call", {"name": "skill_search", "arguments": {"query": "reports"}})
    assert "hits" in found["result"]["structuredContent"]


@pytest.mark.slow
def test_the_loading_thread_imports_the_search_before_the_sdk_server_serves(server: Server) -> None:
    seen = _handshake(server)
    assert server.request("ping")["result"] == {}  # only the SDK server answers a ping: the loader is done
    seen |= server.imported_so_far()
    assert _loaded(seen, PRELOADED) == list(PRELOADED)
    assert _loaded(seen, HEAVY_AT_START) == []  # and nothing else was pulled in with them


@pytest.mark.slow
def test_configured_telemetry_is_imported_before_the_first_answer(tmp_path: Path) -> None:
    # The positive control of the telemetry entries: with an OTLP endpoint set (a closed loopback
    # port: nothing is sent before the batch delay), the same pin sees the SDK at the handshake.
    running = Server(
        build_tree(tmp_path / "skills"),
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "500",
        },
    )
    try:
        seen = _handshake(running)
    finally:
        running.close()
    wanted = ("skill_mcp.telemetry", "opentelemetry.sdk", "opentelemetry.exporter")
    assert _loaded(seen, wanted) == list(wanted)


def _unimportable_sdk(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """``PYTHONPATH`` naming packages that shadow the SDK stack and hang on import, and the file
    each one writes its name to first."""
    shadow, mark = tmp_path / "shadow", tmp_path / "imported"
    for name in SDK_STACK:
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(HANG.format(mark=str(mark), name=name), encoding="utf-8")
    return {"PYTHONPATH": str(shadow)}, mark


def _shadows_reached(mark: Path) -> set[str]:
    """The shadow packages the worker thread has tried to import (waits for the first)."""
    deadline = time.monotonic() + WAIT_S
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return set(mark.read_text(encoding="utf-8").split()) & set(SDK_STACK)


def _kill(running: Server) -> None:
    running.proc.kill()
    running.close()


def test_the_handshake_is_answered_while_the_sdk_cannot_be_imported(tmp_path: Path) -> None:
    env, mark = _unimportable_sdk(tmp_path)
    running = Server(build_tree(tmp_path / "skills"), env)
    try:
        init = running.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "imports", "version": "0"}},
        )
        assert init["result"]["serverInfo"]["name"] == "skill-mcp"
        running.notify("notifications/initialized")
        tools = running.request("tools/list")
        assert "skill_run" in {t["name"] for t in tools["result"]["tools"]}
        # The worker thread is (or will be) stuck in a shadow, so the SDK server cannot have answered.
        assert _shadows_reached(mark)
    finally:
        _kill(running)


def test_list_and_search_are_answered_while_the_sdk_cannot_be_imported(tmp_path: Path) -> None:
    env, mark = _unimportable_sdk(tmp_path)
    running = Server(build_tree(tmp_path / "skills"), env)
    try:
        _handshake_only(running)
        listed = running.request("tools/call", {"name": "skill_list", "arguments": {"limit": 2}})
        assert listed["result"]["structuredContent"]["total"] >= 2
        found = running.request("tools/call", {"name": "skill_search", "arguments": {"query": "reports"}})
        assert found["result"]["structuredContent"]["count"] >= 1
        refused = running.request("tools/call", {"name": "skill_list", "arguments": {"cursor": "bad"}})
        assert refused["result"]["isError"] is True
        assert _shadows_reached(mark)
        # The control: a ping is the SDK server's to answer, and the SDK never loads.
        assert running.proc.stdin is not None and running.proc.stdout is not None
        running.proc.stdin.write(b'{"jsonrpc": "2.0", "id": "p", "method": "ping"}\n')
        running.proc.stdin.flush()
        assert not select.select([running.proc.stdout.fileno()], [], [], 3.0)[0]
    finally:
        _kill(running)


def _handshake_only(running: Server) -> None:
    init = running.request(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "imports", "version": "0"}},
    )
    assert init["result"]["serverInfo"]["name"] == "skill-mcp"
    running.notify("notifications/initialized")


@pytest.mark.slow
def test_a_request_past_the_handshake_waits_for_the_sdk(tmp_path: Path) -> None:
    # The control: the same shadows do stop the SDK server, so nothing but the early path answers.
    env, mark = _unimportable_sdk(tmp_path)
    running = Server(build_tree(tmp_path / "skills"), env)
    try:
        assert running.proc.stdin is not None and running.proc.stdout is not None
        running.proc.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        running.proc.stdin.flush()
        assert _shadows_reached(mark)
        assert not select.select([running.proc.stdout.fileno()], [], [], 3.0)[0]
    finally:
        _kill(running)
