"""The scan helper of ``skill-mcp serve`` (``catalog.scan_helper``), on the real console script.

The server forks it before anything is served. It must never outlive the server (killed with
SIGKILL, or stdin closed), must be gone once the first build is done (cold: it shared the scan;
warm: dismissed), and must not change a byte of what the server answers (the early-path and
wire suites compare answers; here the cold answers with and without the helper).
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

from bench.corpus import generate
from tests.serve import serve_argv

WAIT_S = 60.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    generate(root, 300)  # past HELPER_FROM: a cold build shares its scan
    return root


class Served:
    """``skill-mcp serve`` on pipes, spoken to line by line."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "SKILL_MCP_LOG": "warning", **env}
        self.proc = subprocess.Popen(
            serve_argv([root]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=full
        )
        self._id = 0
        self._buf = b""

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._id += 1
        line = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params or {}}
        self.proc.stdin.write(json.dumps(line).encode() + b"\n")
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + WAIT_S
        while b"\n" not in self._buf:
            assert select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0], "no answer"
            chunk = os.read(fd, 1 << 20)
            assert chunk, "the server closed stdout"
            self._buf += chunk
        head, _, self._buf = self._buf.partition(b"\n")
        answer: dict[str, Any] = json.loads(head)
        assert answer.get("id") == self._id
        return answer

    def handshake(self) -> None:
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "helper", "version": "0"}},
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.proc.stdin.flush()
        self.request("tools/list")

    def walk(self) -> list[dict[str, Any]]:
        pages, cursor = [], None
        while True:
            args: dict[str, Any] = {"limit": 200} if cursor is None else {"limit": 200, "cursor": cursor}
            result = self.request("tools/call", {"name": "skill_list", "arguments": args})["result"]
            pages.append(result)
            cursor = result["structuredContent"].get("nextCursor")
            if not cursor:
                return pages

    def children(self) -> set[int]:
        found: set[int] = set()
        for task in os.listdir(f"/proc/{self.proc.pid}/task"):
            with open(f"/proc/{self.proc.pid}/task/{task}/children", encoding="ascii") as f:
                found.update(int(pid) for pid in f.read().split())
        return found

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def served(corpus: Path, tmp_path: Path) -> Iterator[Served]:
    running = Served(corpus, {"SKILL_MCP_CACHE_DIR": str(tmp_path / "cache")})
    try:
        yield running
    finally:
        running.close()


def _helper_of(served: Served) -> int:
    children = served.children()
    assert len(children) == 1, f"expected the scan helper alone, found {children}"
    return children.pop()


def _gone(pid: int, pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 10)[0])


def test_the_helper_does_not_outlive_a_server_killed_with_sigkill(served: Served) -> None:
    served.handshake()
    helper = _helper_of(served)
    pidfd = os.pidfd_open(helper)
    try:
        assert not select.select([pidfd], [], [], 0)[0]  # positive control: it waits while the server lives
        served.proc.kill()
        served.proc.wait(timeout=10)
        assert _gone(helper, pidfd), "the scan helper outlived the killed server"
    finally:
        os.close(pidfd)


def test_the_helper_ends_when_stdin_closes(served: Served) -> None:
    served.handshake()
    helper = _helper_of(served)
    pidfd = os.pidfd_open(helper)
    try:
        assert served.proc.stdin is not None
        served.proc.stdin.close()
        assert served.proc.wait(timeout=WAIT_S) == 0
        assert _gone(helper, pidfd), "the scan helper outlived the server"
    finally:
        os.close(pidfd)


def test_the_helper_is_gone_after_the_first_build_cold_or_warm(corpus: Path, tmp_path: Path) -> None:
    env = {"SKILL_MCP_CACHE_DIR": str(tmp_path / "cache")}
    answers = []
    for _ in ("cold", "warm"):
        running = Served(corpus, env)
        try:
            running.handshake()
            assert len(running.children()) == 1  # forked before anything was served
            answers.append(running.walk())
            # Cold: it shared the scan; warm: dismissed. Killed either way, then reaped by a thread.
            deadline = time.monotonic() + 10
            while running.children() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert running.children() == set()
        finally:
            running.close()
    assert answers[0] == answers[1]


def test_the_cold_answers_are_those_of_a_server_without_the_helper(corpus: Path, tmp_path: Path) -> None:
    """A server whose fork is refused (as under RLIMIT_NPROC: a ``sitecustomize`` makes ``os.fork``
    raise) has no helper and scans serially; its answers are the same."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(
        "import os\n\ndef _refuse():\n    raise BlockingIOError(11, 'Resource temporarily unavailable')\n\n"
        "os.fork = _refuse\n"
    )
    walks, helpers = [], []
    for env in ({}, {"PYTHONPATH": str(shadow)}):
        running = Served(corpus, {"SKILL_MCP_CACHE": "off", **env})
        try:
            running.handshake()
            helpers.append(len(running.children()))
            walks.append(running.walk())
        finally:
            running.close()
    assert helpers == [1, 0]  # the control had its helper; the refused fork left none
    assert walks[0] == walks[1]


def test_the_helper_is_forked_after_the_hardening(corpus: Path, tmp_path: Path) -> None:
    """The helper inherits the server's wiped exec-time environment block (``harden_early`` ran
    before the fork): the secret the server was started with is not in its ``/proc`` environ."""
    secret = "scan-helper-secret-5c1f"
    running = Served(corpus, {"SKILL_MCP_CACHE_DIR": str(tmp_path / "cache"), "PROBE_SECRET": secret})
    control = subprocess.Popen(["sleep", "30"], env={"PROBE_SECRET": secret})
    try:
        running.handshake()
        helper = _helper_of(running)
        with open(f"/proc/{helper}/environ", "rb") as f:
            assert secret.encode() not in f.read()
        with open(f"/proc/{control.pid}/environ", "rb") as f:
            assert secret.encode() in f.read()  # positive control: an unhardened process shows it
    finally:
        control.kill()
        control.wait(timeout=10)
        running.close()
