"""Fuzzing with Hypothesis: the parsers at the trust boundaries never fail open and never crash.

* path check: any string is refused with a reason, or resolves to a regular file inside the skill;
* frontmatter and declaration parsers: any bytes parse or raise the one documented error type;
* the broker's protocol parser and dispatcher: any frame or message is answered or refused,
  never an exception out of the loop;
* the stdio transport: any line gets a valid JSON-RPC answer or none (a notification), and the
  real server subprocess keeps answering.

The number of examples each property ran is counted and written to build/security/fuzz.json.
Example counts are fixed (``derandomize``) so CI time is predictable.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skill_mcp import brokerwire as protocol
from skill_mcp.catalog.declaration import DeclarationError, build_declaration, read_declaration
from skill_mcp.catalog.frontmatter import FrontmatterError, parse_frontmatter, split
from skill_mcp.declwire import DeclaredScript, DeclaredSkill
from skill_mcp.errors import SkillMcpError
from skill_mcp.paths import is_inside, resolve_inside
from skill_mcp.reasons import Refusal
from skill_mcp_launcher import checks, policy
from skill_mcp_launcher.boot import _serve_one
from skill_mcp_launcher.broker import Broker
from tests.security.offline_broker import offline_broker

FIGURES = Path(__file__).resolve().parents[2] / "build" / "security" / "fuzz.json"
COUNTS: dict[str, int] = {}
# Fixed counts, whatever the Hypothesis profile: tests/security/README.md publishes the examples run
# per property (and ``fuzz.json`` records them), so the suite's figures are the same on every machine.
FUZZ = settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def write_counts() -> Iterator[None]:
    yield
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    FIGURES.write_text(json.dumps({**old, **COUNTS}, indent=2) + "\n", encoding="utf-8")


# --- the path check -----------------------------------------------------------------------------

PIECES = st.sampled_from(
    [
        "scripts",
        "probe.py",
        "link",
        "dirlink",
        "fifo",
        ".",
        "..",
        "/",
        "//",
        "\\",
        "%2e",
        "%2f",
        "%252f",
        "\x00",
        "\n",
        "\x1b",
        "\x85",
        "\u2215",
        "\uff0e",
        "\u2024",
        "\uff0f",
        "-",
        "~",
        "SKILL.md",
        "a" * 300,
        "\u0301",
        "\ufeff",
        " ",
    ]
)
PATHS = st.one_of(
    st.text(max_size=80),
    st.lists(PIECES, max_size=12).map("".join),
    st.lists(st.one_of(PIECES, st.text(max_size=6)), max_size=8).map("/".join),
)


@pytest.fixture(scope="module")
def skill_dir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-fuzz-"))
    skill = base / "skill"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: skill\ndescription: d\n---\n", encoding="utf-8")
    (skill / "scripts" / "probe.py").write_text("print(1)\n", encoding="utf-8")
    (base / "outside.py").write_text("print(2)\n", encoding="utf-8")
    os.symlink(base / "outside.py", skill / "link")
    os.symlink(base, skill / "dirlink")
    os.mkfifo(skill / "fifo")
    try:
        yield Path(os.path.realpath(skill))
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@FUZZ
@given(rel=PATHS)
def test_any_string_is_refused_with_a_reason_or_resolves_inside_the_skill(skill_dir: Path, rel: str) -> None:
    _count("path_check")
    try:
        real, _st = resolve_inside(skill_dir, rel)
    except SkillMcpError as exc:
        assert exc.reason in (Refusal.INVALID_PATH, Refusal.OUTSIDE_SKILL, Refusal.NOT_FOUND, Refusal.NOT_A_FILE)
        return
    assert is_inside(skill_dir, Path(os.path.realpath(real))) and os.path.isfile(real)


# --- frontmatter and declaration parsers --------------------------------------------------------

YAMLISH = st.lists(
    st.sampled_from(
        [
            "name: x",
            "description: y",
            "mcp-host:",
            "  version: 1",
            "  run:",
            "    - script: scripts/a.py",
            "      interpreter: python",
            "  egress: [a.b]",
            "  env: [A]",
            "&a [1]",
            "*a",
            "!!python/object:os.system",
            "? [1, 2]",
            "{",
            "]",
            "- -",
            "'",
            '"',
            ":",
            "---",
            "...",
            "\t",
            "#",
            "x: .nan",
            "y: 1e999",
            "z: 0x1f",
            "k: !!binary aGk=",
            "<<: *a",
        ]
    ),
    max_size=12,
).map("\n".join)
DOCS = st.one_of(
    st.binary(max_size=400),
    st.tuples(YAMLISH, st.text(max_size=40)).map(lambda t: f"---\n{t[0]}\n---\n{t[1]}".encode()),
    st.tuples(st.binary(max_size=60), YAMLISH).map(lambda t: b"---\n" + t[0] + t[1].encode() + b"\n---\n"),
)


@pytest.mark.slow
@FUZZ
@given(raw=DOCS)
def test_any_bytes_parse_or_raise_frontmatter_error(raw: bytes) -> None:
    _count("frontmatter")
    try:
        parsed, host = parse_frontmatter(split(raw))
    except FrontmatterError:
        return
    assert isinstance(parsed, dict)
    result = read_declaration(host, 2)  # never raises: a bad block costs the scripts, reported
    assert result.declaration is None or result.declaration.version == 1


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                ["version", "run", "env", "egress", "script", "interpreter", "timeout", "name", "secret", "x"]
            ),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=20,
)


@pytest.mark.slow
@FUZZ
@given(block=JSONISH)
def test_any_declaration_value_builds_or_raises_declaration_error(block: Any) -> None:
    _count("declaration")
    try:
        declaration, _unknown = build_declaration(block)
    except DeclarationError:
        return
    for row in declaration.run:  # whatever got through is a plain relative path
        assert not row.script.startswith(("/", "-")) and ".." not in row.script.split("/")


# --- the broker's protocol parser and dispatcher ------------------------------------------------


def _broker() -> Broker:
    return offline_broker("fuzzing")


FRAMES = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda body: struct.pack(">I", len(body)) + body, st.binary(max_size=64)),
    st.builds(lambda obj: protocol.encode(obj) if isinstance(obj, dict) else struct.pack(">I", 4) + b"null", JSONISH),
    st.builds(lambda n: struct.pack(">I", n), st.integers(0, 2**32 - 1)),
    # Nesting far past what any request needs (the decoder recurses per level).
    st.builds(
        lambda depth, opener: (lambda body: struct.pack(">I", len(body)) + body)((opener * depth).encode()),
        st.integers(60, 5000),
        st.sampled_from(["[", '{"a":']),
    ),
)


@pytest.mark.slow
@FUZZ
@given(frame=FRAMES)
def test_any_frame_is_answered_or_refused_without_crashing_the_broker(frame: bytes) -> None:
    _count("broker_frame")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(frame)
        ours.shutdown(socket.SHUT_WR)
        keep_going = _serve_one(_broker(), theirs)  # the launcher's own loop step: returns, never raises
        assert isinstance(keep_going, bool)
        if keep_going:  # a whole frame arrived: it was answered with one reply frame
            reply = protocol.recv(ours, first_byte_timeout=5, frame_timeout=5)
            assert reply is not None and isinstance(reply.get("ok"), bool)
            assert reply["ok"] or reply["reason"] in {r.value for r in Refusal}


# Requests shaped like the server's, with hostile values, beside arbitrary JSON.
REQUESTS = st.one_of(
    JSONISH,
    st.builds(
        lambda skill, script, args, extra: {"skill": skill, "script": script, "args": args, **extra},
        st.sampled_from(["s", "S", "", "../s", "s/..", "\x00"]) | st.text(max_size=12),
        st.sampled_from(["scripts/a.py", "scripts/../SKILL.md", "/etc/passwd", "scripts/a.py/"]) | st.text(max_size=12),
        st.lists(st.text(max_size=12), max_size=4),
        st.dictionaries(
            st.sampled_from(["env", "egress", "timeout_s", "interpreter", "argv", "cwd"]), JSONISH, max_size=3
        ),
    ),
)
FUZZ_SKILL = DeclaredSkill(
    "s",
    "/nonexistent-root/s",
    (0, 0, 0, 0, 0),
    ("api.example",),
    (DeclaredScript("scripts/a.py", "python", ("KEY",), 30),),
)


@pytest.mark.slow
@FUZZ
@given(raw=REQUESTS)
def test_any_run_request_is_decided_or_refused_with_a_reason(raw: Any) -> None:
    _count("broker_plan")
    try:
        policy.decide(
            checks.parse_request(raw),
            skills={"s": FUZZ_SKILL},
            grants=policy.Grants("declaration"),
            interpreters={"python": sys.executable},
            roots=("/nonexistent-root",),
            environ={"KEY": "v"},
        )
    except SkillMcpError as exc:
        assert exc.reason in {r for r in Refusal}
        return
    raise AssertionError("a request for a script that does not exist was accepted")


# --- the stdio transport ------------------------------------------------------------------------

METHODS = st.sampled_from(
    [
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "initialize",
        "notifications/initialized",
        "completion/complete",
        "logging/setLevel",
        "nonexistent/method",
        "",
        "$/cancel",
        "notifications/cancelled",
    ]
)
IDS = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63),
    st.text(max_size=10),
    st.booleans(),
    st.floats(),
    st.lists(st.integers(), max_size=2),
)
# A JSON-RPC request or notification of any method, and a tools/call of any tool, with any params.
REQUESTS = st.builds(
    lambda m, i, p, has_id: json.dumps({"jsonrpc": "2.0", "method": m, **({"id": i} if has_id else {}), "params": p}),
    METHODS,
    IDS,
    JSONISH,
    st.booleans(),
)
TOOL_CALLS = st.builds(
    lambda name, args: json.dumps(
        {"jsonrpc": "2.0", "id": "t", "method": "tools/call", "params": {"name": name, "arguments": args}}
    ),
    st.sampled_from(["skill_list", "skill_load", "skill_file", "skill_run", "skill_search", "nope"]),
    JSONISH,
)
MESSAGES = st.one_of(
    st.text(max_size=120).filter(lambda s: "\n" not in s and "\r" not in s),
    REQUESTS,
    TOOL_CALLS,
    st.builds(json.dumps, JSONISH),
)


OBJECT_MESSAGES = st.one_of(
    REQUESTS,
    TOOL_CALLS,
    st.builds(json.dumps, st.dictionaries(st.text(max_size=8), JSONISH, max_size=4)),
)


class StdioServer:
    """A real server subprocess, one JSON line in, lines out until a sentinel ping is answered."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.start()

    def start(self) -> None:
        from tests.serve import serve_argv

        root = self.root
        env = {"PATH": "/usr/bin:/bin", "SKILL_MCP_LOG": "error", "MCP_CONFIRM_ELICITATION": "off"}
        self.proc = subprocess.Popen(
            serve_argv([root]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.sentinel = 0
        self.pending = b""
        self.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "fuzz", "version": "0"},
                    },
                }
            )
        )
        assert self.read_until("init")[-1]["result"]
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def restart(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.start()

    def exchange(self, line: str, timeout: float) -> list[dict[str, Any]]:
        """Send one line and a sentinel ping; return what came back up to the ping's answer.

        A server that stops answering is restarted (so the next example starts from a live one)
        and the failure is raised.
        """
        if os.environ.get("SEC_FUZZ_LOG"):  # replaying a failure: which lines came before the hang
            with open(os.environ["SEC_FUZZ_LOG"], "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
        self.send(line)
        self.sentinel += 1
        sentinel = f"sentinel-{self.sentinel}"
        self.send(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}))
        try:
            answers = self.read_until(sentinel, timeout)
        except AssertionError:
            self.restart()
            raise
        assert answers[-1].get("result") == {}  # the server is alive and still speaks the protocol
        return answers

    def _next_line(self, timeout: float) -> bytes:
        """One line from stdout, read with os.read into our own buffer (a buffered readline would
        hide a second line already read from the selector, and look like a hang)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.pending:
                assert sel.select(timeout), "the server did not answer in time"
                chunk = os.read(fd, 1 << 16)
                assert chunk, "the server closed stdout (it crashed)"
                self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def read_until(self, wanted: Any, timeout: float = 30) -> list[dict[str, Any]]:
        out = []
        while True:
            message = json.loads(self._next_line(timeout))  # every line on stdout is JSON
            assert message.get("jsonrpc") == "2.0" and ("id" in message or "method" in message), message
            if "id" in message and "method" not in message:
                assert ("result" in message) != ("error" in message), message
            out.append(message)
            if message.get("id") == wanted and "method" not in message:
                return out

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


@pytest.fixture(scope="module")
def stdio_server() -> Iterator[StdioServer]:
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-fuzz-stdio-"))
    (base / "demo").mkdir()
    (base / "demo" / "SKILL.md").write_text(
        "---\nname: demo\ndescription: A demo skill.\n---\nbody\n", encoding="utf-8"
    )
    server = StdioServer(base)
    try:
        yield server
    finally:
        assert server.close() == 0  # a clean exit on EOF after everything it was sent
        import shutil

        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(line=OBJECT_MESSAGES)
def test_any_json_object_line_gets_a_valid_answer_or_none(stdio_server: StdioServer, line: str) -> None:
    _count("stdio_object_line")
    stdio_server.exchange(line, timeout=30)


@pytest.mark.slow
@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(line=MESSAGES)
def test_any_stdio_line_gets_a_valid_answer_or_none(stdio_server: StdioServer, line: str) -> None:
    _count("stdio_any_line")
    stdio_server.exchange(line, timeout=5)


@pytest.mark.parametrize("line", ["garbage", "0", "[]", '{"jsonrpc": "2.0", "id": 1, "method"', "\ud800"])
def test_unparseable_line_is_answered_and_the_session_continues(stdio_server: StdioServer, line: str) -> None:
    answers = stdio_server.exchange(line, timeout=5)
    assert any("error" in a and a["error"]["code"] in (-32700, -32600) for a in answers), answers
