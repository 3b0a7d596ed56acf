"""Talk to ``skill-mcp serve`` (started through ``tests/serve.py``): SDK client or raw lines.

The fixture tree has, on purpose: a skill with nested folders, a binary file, a file over the
1 MiB per-file cap and a declared script (``alpha``); a plain skill (``beta``); a skill whose
frontmatter name disagrees with its directory (``gamma`` says ``not-gamma``: served by the
tools, left out of the skills extension); a directory with broken frontmatter (reported); and
a skill whose five files add up to more than the 4 MiB batch cap (``bulk``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
from mcp import Client
from pydantic import TypeAdapter

from tests.serve import serve_argv, stdio_params

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
BIG = 1024 * 1024 + 10
BULK_FILE = 900 * 1024
# The Skills extension's answers are read raw, through a TypeAdapter: the SDK takes one at run time,
# though its type variable is bound to result models (hence the three targeted ignores below).
_RAW = TypeAdapter(dict[str, Any])

ALPHA_MD = """---
name: alpha
description: Alpha turns notes into reports.
license: MIT
metadata:
  author: tests
  version: "1.0"
mcp-host:
  version: 1
  run:
    - script: scripts/hello.py
      interpreter: python
---
# Alpha

Read references/guide.md first, then references/deep/notes.txt.
"""


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)


# Every file ``build_tree`` writes under alpha/, in path order: what a listing of alpha must hold.
ALPHA_FILES = (
    "SKILL.md",
    "assets/logo.png",
    "references/big.txt",
    "references/deep/notes.txt",
    "references/guide.md",
    "scripts/hello.py",
)


def settle_clock(root: Path) -> None:
    """Wait (bounded) until every file under ``root`` is older than the cache's racy margin, so
    a server may write what it read: otherwise a test would only see cold starts."""
    from skill_mcp.catalog.cache import COARSE_MARGIN_NS, RACY_MARGIN_NS

    newest = max(
        os.lstat(os.path.join(d, n)).st_ctime_ns for d, dirs, files in os.walk(root) for n in [*dirs, *files, "."]
    )
    margin = COARSE_MARGIN_NS if newest % 1_000_000_000 == 0 else RACY_MARGIN_NS
    deadline = time.monotonic() + 5
    while time.time_ns() <= newest + 2 * margin and time.monotonic() < deadline:
        time.sleep(0.01)


def build_tree(root: Path) -> Path:
    _write(root / "alpha" / "SKILL.md", ALPHA_MD)
    _write(root / "alpha" / "references" / "guide.md", "# Guide\n\nStep one.\n")
    _write(root / "alpha" / "references" / "deep" / "notes.txt", "deep notes\n")
    _write(root / "alpha" / "assets" / "logo.png", PNG)
    _write(root / "alpha" / "scripts" / "hello.py", "print('hello')\n")
    _write(root / "alpha" / "references" / "big.txt", b"x" * BIG)
    _write(root / "beta" / "SKILL.md", "---\nname: beta\ndescription: Beta answers questions.\n---\nBeta body.\n")
    _write(root / "gamma" / "SKILL.md", "---\nname: not-gamma\ndescription: Gamma, misnamed.\n---\nGamma body.\n")
    _write(root / "broken" / "SKILL.md", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
    _write(root / "bulk" / "SKILL.md", "---\nname: bulk\ndescription: Many large files.\n---\nBulk.\n")
    for i in range(5):
        _write(root / "bulk" / "data" / f"part{i}.txt", bytes([65 + i]) * BULK_FILE)
    return root


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Wire:
    """One open SDK client on a server shared by a module's read-only tests."""

    client: Client
    era: str
    transport: str
    root: Path

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        yield self.client


Connect = Callable[..., AbstractAsyncContextManager[Client]]
"""``connect(root, era, env=None)``: the ``connect`` fixture, over stdio or Streamable HTTP."""


@asynccontextmanager
async def connect(
    root: Path, era: str, env: Mapping[str, str] | None = None, **client_kwargs: Any
) -> AsyncIterator[Client]:
    async with Client(stdio_params([root], env), mode=era, read_timeout_seconds=30, **client_kwargs) as client:
        yield client


@asynccontextmanager
async def in_process(
    root: Path, era: str, env: Mapping[str, str] | None = None, **client_kwargs: Any
) -> AsyncIterator[Client]:
    """The server for ``root`` under ``env``, built in this process, and the SDK's in-memory client on it.

    For what ``Settings`` and the catalog alone decide (narrowing, problems, answers): the same
    handlers and protocol as ``connect`` without a subprocess. What a transport decides (framing,
    stderr, signals, sizes on the wire) still goes through ``connect``.
    """
    from skill_mcp.config import load_settings
    from skill_mcp.server import build_server

    server = build_server(load_settings([str(root)], dict(env or {})))
    async with Client(server, mode=era, read_timeout_seconds=30, **client_kwargs) as client:
        yield client


async def handshake(client: Client, era: str) -> tuple[types.ServerCapabilities, str | None]:
    """Capabilities and instructions as the server states them in this era.

    A client pinned to 2026-07-28 adopts a synthesized discovery result without asking, so the
    modern era sends a real ``server/discover`` here.
    """
    if era == "legacy":
        return client.server_capabilities, client.instructions
    raw = await client.session.send_discover("2026-07-28")
    found = types.DiscoverResult.model_validate(raw)
    return found.capabilities, found.instructions


class SkillsListRequest(types.Request[types.PaginatedRequestParams, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: types.PaginatedRequestParams = types.PaginatedRequestParams()


class UriParams(types.PaginatedRequestParams):
    uri: str


class SkillsGetRequest(types.Request[UriParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"


class DirectoryReadRequest(types.Request[UriParams, Literal["resources/directory/read"]]):
    method: Literal["resources/directory/read"] = "resources/directory/read"


async def skills_list(client: Client, cursor: str | None = None) -> dict[str, Any]:
    req = SkillsListRequest(params=types.PaginatedRequestParams(cursor=cursor))
    return await client.session.send_request(req, _RAW)  # type: ignore[type-var]  # a TypeAdapter: the raw answer


async def skills_get(client: Client, uri: str) -> dict[str, Any]:
    return await client.session.send_request(SkillsGetRequest(params=UriParams(uri=uri)), _RAW)  # type: ignore[type-var]


async def directory_read(client: Client, uri: str, cursor: str | None = None) -> dict[str, Any]:
    return await client.session.send_request(
        DirectoryReadRequest(params=UriParams(uri=uri, cursor=cursor)),  # type: ignore[type-var]
        _RAW,
    )


class RawServer:
    """The server with plain pipes: write lines, read stdout lines one at a time (bounded)."""

    def __init__(self, root: Path, env: Mapping[str, str] | None = None) -> None:
        base = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
        self.proc = subprocess.Popen(
            serve_argv([root]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**base, "LANG": "C.UTF-8", **(env or {})},
        )

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() if isinstance(line, str) else line)
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def request(self, rid: int, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg))

    def read_line(self) -> bytes:
        """One stdout line. The server answers every request, so a missing line is a failure the
        per-test timeout (pytest-timeout) turns into an error rather than a hang."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed stdout"
        return line

    def close(self, timeout: float = 20) -> tuple[bytes, bytes]:
        """Close stdin, wait for the exit (bounded) and return the rest of stdout and all stderr."""
        try:
            return self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=timeout)
            raise

    def initialize(self) -> dict[str, Any]:
        self.request(
            1,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "0"}},
        )
        reply = json.loads(self.read_line())
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return reply
