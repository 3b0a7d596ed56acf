"""Start the real server over Streamable HTTP in a subprocess, and connect the SDK's client to it.

For any test that wants the HTTP transport (and for the integration suite parametrised over
stdio and HTTP):

    with running_http_server([skills_root], token=TOKEN) as srv:      # or no_auth=True
        async with http_client(srv.url, token=TOKEN) as client:        # an mcp.Client
            await client.list_tools()

The server listens on 127.0.0.1 port 0; its URL is read from its stderr (bounded wait). On
exit it gets SIGTERM and a bounded wait, then SIGKILL, and its stderr stays in ``srv.stderr``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD = Path(__file__).resolve().parent / "serve_child.py"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
_URL = re.compile(r"http listening on (http://\S+/mcp)")


@dataclass
class HttpServer:
    proc: subprocess.Popen[bytes]
    url: str
    stderr_lines: list[str] = field(default_factory=list)

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])

    def terminate(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then wait (bounded); SIGKILL if it did not stop. Returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
            raise


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment: no SKILLS_DIR, no hosted markers, no token leaking in from outside."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    env.update(extra or {})
    return env


def cli_command() -> list[str]:
    """``skill-mcp`` installed next to this interpreter, else the CLI module."""
    script = Path(sys.executable).with_name("skill-mcp")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from skill_mcp.cli import main; sys.exit(main())"]


def server_argv(roots: Sequence[Path | str], *, address: str = "127.0.0.1:0", no_auth: bool = False,
                token_file: Path | None = None, allowed_hosts: Sequence[str] = (),
                drain_seconds: float | None = None, stop_hooks: bool = True, watch: bool = False) -> list[str]:
    """The real ``skill-mcp serve --http`` when it can express the request; otherwise the
    test child (``serve_child.py``), which calls the same ``serve_http`` with test-only bounds."""
    if drain_seconds is None and stop_hooks:
        argv = [*cli_command(), "serve", "--http", address]
    else:
        argv = [sys.executable, str(CHILD), address]
        if drain_seconds is not None:
            argv += ["--drain-seconds", str(drain_seconds)]
        if not stop_hooks:
            argv.append("--without-stop-hooks")
    for name in allowed_hosts:
        argv += ["--allowed-host", name]
    for root in roots:
        argv += ["--skills-dir", str(root)]
    if watch:
        assert drain_seconds is None and stop_hooks, "--watch goes through the real CLI"
        argv.append("--watch")
    if no_auth:
        argv.append("--no-auth")
    if token_file is not None:
        argv += ["--token-file", str(token_file)]
    return argv


@contextmanager
def running_http_server(
    roots: Sequence[Path | str],
    *,
    token: str | None = None,
    no_auth: bool = False,
    env: Mapping[str, str] | None = None,
    address: str = "127.0.0.1:0",
    allowed_hosts: Sequence[str] = (),
    drain_seconds: float | None = None,
    token_file: Path | None = None,
    stop_hooks: bool = True,
    watch: bool = False,
) -> Iterator[HttpServer]:
    """Start the server; yield once it listens. ``token`` goes in through ``MCP_HTTP_TOKEN``."""
    extra = dict(env or {})
    if token is not None:
        extra["MCP_HTTP_TOKEN"] = token
    proc = subprocess.Popen(
        server_argv(roots, address=address, no_auth=no_auth, allowed_hosts=allowed_hosts,
                    drain_seconds=drain_seconds, token_file=token_file, stop_hooks=stop_hooks, watch=watch),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=child_env(extra), start_new_session=True,
    )
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            match = _URL.search(line)
            if match and not url:
                url.append(match.group(1))
                found.set()
        found.set()  # EOF: the child died before listening

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        if not found.wait(START_TIMEOUT) or not url:
            raise RuntimeError(f"the HTTP server did not start; stderr:\n{''.join(lines)}")
        server = HttpServer(proc=proc, url=url[0], stderr_lines=lines)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT)
        reader.join(timeout=STOP_TIMEOUT)
        if proc.stderr is not None:
            proc.stderr.close()


@asynccontextmanager
async def http_client(url: str, *, token: str | None = None, mode: str = "legacy",
                      headers: Mapping[str, str] | None = None, max_sse_event_size: int | None = None,
                      **client_kwargs: Any) -> AsyncIterator[Any]:
    """An ``mcp.Client`` over Streamable HTTP. ``mode``: ``legacy`` (initialize handshake) or
    ``2026-07-28`` (per-request era); ``auto`` probes. ``max_sse_event_size`` overrides the SDK
    client's 1 MiB cap on one SSE event (handshake-era answers travel as one event)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    all_headers = dict(headers or {})
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    timeout = httpx2.Timeout(30.0, read=60.0)
    async with httpx2.AsyncClient(headers=all_headers, timeout=timeout) as http:
        sse_cap = {} if max_sse_event_size is None else {"max_sse_event_size": max_sse_event_size}
        transport = streamable_http_client(url, http_client=http, **sse_cap)
        async with Client(transport, mode=mode, **client_kwargs) as client:  # type: ignore[arg-type]
            yield client


@asynccontextmanager
async def http_connect(root: Path, era: str, env: Mapping[str, str] | None = None,
                       **client_kwargs: Any) -> AsyncIterator[Any]:
    """Drop-in twin of ``tests.integration.harness.connect`` over Streamable HTTP.

    Starts its own server (token auth, 127.0.0.1, port 0) serving ``root`` with ``env`` and
    yields an ``mcp.Client`` in ``era`` (``legacy`` or ``2026-07-28``).
    """
    token = "integration-token-0123456789abcdef"
    with running_http_server([root], token=token, env=env) as server:
        async with http_client(server.url, token=token, mode=era, **client_kwargs) as client:
            yield client
