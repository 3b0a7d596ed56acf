"""The one way a test starts the real server: the production command, ``skill-mcp serve``.

Every suite that runs a server as a subprocess goes through here, so what the tests start is what
a user starts (the console script next to this interpreter, not a module entry point):

    stdio_params([root], env)            # SDK StdioServerParameters: mcp.Client(stdio_params(...))
    serve_argv([root], "--watch")        # the argv, for a raw Popen (line-level stdio tests)
    exchange(root, lines, env)           # stdin lines in, every stdout line and stderr out
    with running_http_server([root], token=TOKEN) as srv:   # serve --http; yields once it listens
        srv.url                          # http://127.0.0.1:PORT/mcp

A decision that depends only on ``Settings`` needs no subprocess: build the server in process
(``skill_mcp.server.build_server``) and talk to it through the SDK's in-memory client,
``mcp.Client(server)`` - see ``tests/integration/test_narrowing.py``. The container suites are
the exception: there the image starts the server.

The HTTP server listens on 127.0.0.1 port 0; its URL is read from its stderr (bounded wait). On
exit it gets SIGTERM and a bounded wait, then SIGKILL to its process group, and its stderr stays
in ``srv.stderr``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mcp import StdioServerParameters

# The installed console script (``[project.scripts]``), beside the interpreter running the tests.
SKILL_MCP = str(Path(sys.executable).with_name("skill-mcp"))

# ``serve --http`` with test-only bounds the command line does not offer (a short drain, the
# server without its stop hooks): a script calling the same ``serve_http``. Only the shutdown
# tests need it; everything else runs the real command.
HTTP_CHILD = Path(__file__).resolve().parent / "http" / "serve_child.py"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
_URL = re.compile(r"http listening on (http://\S+/mcp)")


def serve_argv(roots: Sequence[Path | str] = (), *options: str, python: str | None = None) -> list[str]:
    """``skill-mcp serve OPTIONS --skills-dir ROOT...``.

    ``python`` runs the console script with that interpreter (``python skill-mcp serve``), for a
    test that needs a wrapper interpreter (one the unprivileged user can run, a stderr redirect).
    """
    argv = [SKILL_MCP, "serve", *options]
    for root in roots:
        argv += ["--skills-dir", str(root)]
    return argv if python is None else [python, *argv]


def stdio_params(
    roots: Sequence[Path | str] = (),
    env: Mapping[str, str] | None = None,
    *,
    options: Sequence[str] = (),
    cwd: Path | str | None = None,
) -> StdioServerParameters:
    """``skill-mcp serve`` over stdio for the SDK's client; ``SKILL_MCP_LOG=warning`` unless ``env`` says."""
    argv = serve_argv(roots, *options)
    return StdioServerParameters(
        command=argv[0],
        args=argv[1:],
        env={"SKILL_MCP_LOG": "warning", **(env or {})},
        cwd=None if cwd is None else str(cwd),
    )


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


def exchange(
    root: Path, lines: Sequence[bytes], env: Mapping[str, str], timeout: float = 120
) -> tuple[list[bytes], str]:
    """Every stdout line ``skill-mcp serve --skills-dir root`` writes for ``lines`` (written to
    its stdin, which is then closed), and its stderr; it must exit 0. ``env`` is its whole
    environment, ``PATH`` and ``HOME`` added when missing. For tests of bytes on the wire."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", **env}
    done = subprocess.run(
        [SKILL_MCP, "serve", "--skills-dir", str(root)],
        input=b"".join(lines),
        capture_output=True,
        env=full,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.splitlines(keepends=True), done.stderr.decode(errors="replace")


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment: no SKILLS_DIR, no hosted markers, no token leaking in from outside."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    env.update(extra or {})
    return env


def server_argv(
    roots: Sequence[Path | str],
    *,
    address: str = "127.0.0.1:0",
    no_auth: bool = False,
    token_file: Path | None = None,
    allowed_hosts: Sequence[str] = (),
    drain_seconds: float | None = None,
    stop_hooks: bool = True,
    watch: bool = False,
) -> list[str]:
    """``skill-mcp serve --http ADDRESS ...`` when the command line can express the request;
    otherwise the test child (``HTTP_CHILD``), which calls the same ``serve_http`` with test-only bounds."""
    if drain_seconds is None and stop_hooks:
        argv = [SKILL_MCP, "serve", "--http", address]
    else:
        argv = [sys.executable, str(HTTP_CHILD), address]
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
    """Start ``serve --http``; yield once it listens. ``token`` goes in through ``MCP_HTTP_TOKEN``."""
    extra = dict(env or {})
    if token is not None:
        extra["MCP_HTTP_TOKEN"] = token
    proc = subprocess.Popen(
        server_argv(
            roots,
            address=address,
            no_auth=no_auth,
            allowed_hosts=allowed_hosts,
            drain_seconds=drain_seconds,
            token_file=token_file,
            stop_hooks=stop_hooks,
            watch=watch,
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_env(extra),
        start_new_session=True,
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
