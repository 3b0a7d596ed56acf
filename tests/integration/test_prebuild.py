"""The catalog and its search index are built once the server serves, before any request asks.

A host sends its first catalog request when a model decides to call a tool, usually long after
the handshake. ``server.prebuild`` builds the catalog and opens (or builds) the search index
in a background thread as soon as the server serves, so that request finds both ready. The
handshake itself still reads no directory (``test_startup_imports``). Over stdio and over HTTP,
a real server with a cache directory writes its catalog and its search index there before any
request reads the catalog: the old server wrote neither until one did. Where the SDK server
answers the handshake itself (narrowed tools here), the background build still shares a cold
scan with the scan helper, forked before its thread starts. In process: one build whoever
comes first, a provider that is built or builds on its own left alone, and a failure left to
the first request, which meets it again. Against a tree built to make the build slow, the
server still answers ``ping`` while it runs, and ends when stdin ends without waiting for it.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import threading
import time
from pathlib import Path

import anyio
import psutil
import pytest

from bench.corpus import generate
from skill_mcp.catalog.lazy import LazyCatalog
from skill_mcp.config import load_settings
from skill_mcp.server import prebuild
from skill_mcp.surfaces.search_tool import SearchState
from tests.integration.harness import build_tree, connect, settle_clock
from tests.serve import running_http_server, serve_argv

WAIT_S = 30.0


def _written(cache: Path) -> set[str]:
    """The kinds of file in the cache directory: ``catalog``, ``search``."""
    return {p.name.split("-", 1)[0] for p in cache.iterdir()} if cache.is_dir() else set()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = build_tree(tmp_path / "skills")
    settle_clock(root)  # files older than the racy margin: the cache may be written
    return root


@pytest.mark.slow
@pytest.mark.anyio
async def test_stdio_builds_the_catalog_and_its_index_before_any_request(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    async with connect(tree, "legacy", {"SKILL_MCP_CACHE_DIR": str(cache)}) as client:
        # The handshake is done; nothing that reads the catalog has been asked.
        deadline = time.monotonic() + WAIT_S
        while _written(cache) != {"catalog", "search"} and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert _written(cache) == {"catalog", "search"}
        out = (await client.call_tool("skill_search", {"query": "beta answers questions"})).structured_content
    assert out is not None
    assert out["coverage"] == "complete"
    assert out["hits"][0]["name"] == "beta"


@pytest.mark.slow
def test_http_builds_the_catalog_and_its_index_before_any_request(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with running_http_server([tree], no_auth=True, env={"SKILL_MCP_CACHE_DIR": str(cache)}):
        deadline = time.monotonic() + WAIT_S
        while _written(cache) != {"catalog", "search"} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _written(cache) == {"catalog", "search"}


@pytest.mark.slow
def test_a_server_composed_before_the_handshake_shares_its_background_build_with_the_helper(tmp_path: Path) -> None:
    """Narrowed tools turn the early handshake off: the SDK server is composed first and the
    background build starts beside it, in a thread, which cannot fork the scan helper a cold
    scan shares its work with. So the helper is forked before that thread starts, while the
    process is still single-threaded, and the build takes it (``scanning with the scan helper``
    in the debug log), as the first request's build did when it ran on the event loop. The
    control: the same server with the early handshake on shares its build the same way."""
    root = tmp_path / "skills"
    root.mkdir()
    generate(root, 150)  # from scan_helper.HELPER_FROM (100) candidates a cold scan is shared
    settle_clock(root)
    for narrowed in ({"MCP_ENABLED_TOOLS": "skill_list,skill_search"}, {}):
        cache = tmp_path / f"cache-{len(narrowed)}"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "SKILL_MCP_CACHE_DIR": str(cache),
            "SKILL_MCP_LOG": "debug",
            **narrowed,
        }
        err = tmp_path / f"stderr-{len(narrowed)}"
        with (
            err.open("wb") as sink,
            subprocess.Popen(
                serve_argv([root]),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=sink,
                env=env,
            ) as proc,
        ):
            assert proc.stdin is not None and proc.stdout is not None
            hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            proc.stdin.write(
                json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode() + b"\n"
            )
            proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            proc.stdin.flush()
            assert b'"id":1' in proc.stdout.readline()
            deadline = time.monotonic() + WAIT_S
            while _written(cache) != {"catalog", "search"} and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.stdin.close()
            proc.wait(WAIT_S)
        assert _written(cache) == {"catalog", "search"}, narrowed
        messages = [json.loads(line).get("msg") for line in err.read_text().splitlines() if line.startswith("{")]
        assert "scanning with the scan helper" in messages, narrowed


# A frontmatter as slow to read as the YAML bounds allow: a flow sequence of 15,000 one-item
# sequences comes near the 64 KiB size limit; libyaml reads it all, finds it past the values bound and
# hands it to the pure-Python loader, which words the refusal at the bound: about 0.14 s of CPU
# each here. The build reads every one before it can answer; the rest of the server must not
# wait for it.
HEAVY = 40
HEAVY_ITEMS = 15_000


def _hostile_tree(root: Path) -> Path:
    items = ",".join("[a]" for _ in range(HEAVY_ITEMS))
    for i in range(HEAVY):
        text = f"---\nname: heavy-{i}\ndescription: Slow to read on purpose.\nl: [{items}]\n---\n# heavy\n"
        (root / f"heavy-{i}").mkdir(parents=True)
        (root / f"heavy-{i}" / "SKILL.md").write_text(text, encoding="utf-8")
    (root / "ok").mkdir()
    (root / "ok" / "SKILL.md").write_text("---\nname: ok\ndescription: The neighbour.\n---\n# ok\n", encoding="utf-8")
    settle_clock(root)
    return root


def _send(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, object]:
    """The answer to ``request_id``, or a failure once ``WAIT_S`` passed without it."""
    assert proc.stdout is not None
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = proc.stdout.readline()
        assert line, "the server closed stdout"
        message = json.loads(line)
        if message.get("id") == request_id:
            return dict(message)
    raise AssertionError(f"no answer to request {request_id} within {WAIT_S} s")


def _hostile_server(root: Path, cache: Path, home: Path, err: Path) -> subprocess.Popen[bytes]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "SKILL_MCP_CACHE_DIR": str(cache)}
    with err.open("wb") as sink:
        proc = subprocess.Popen(serve_argv([root]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink, env=env)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    _send(proc, {"id": 1, "method": "initialize", "params": hello})
    assert "result" in _answer(proc, 1)
    _send(proc, {"method": "notifications/initialized"})
    return proc


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """End ``proc`` as stdin's end does, killed only if it outlives ``WAIT_S``; close its pipes."""
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None and not pipe.closed:
            pipe.close()
    try:
        proc.wait(WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_a_build_slowed_by_hostile_frontmatters_neither_stops_ping_nor_outlives_the_server(tmp_path: Path) -> None:
    """Denied: a tree whose build takes seconds (forty frontmatters as slow to read as the YAML
    bounds allow) holding the server's other answers, or its exit, until the build is done.
    The server answers ``ping`` while the background build runs (the catalog is not written
    yet), and when stdin ends it exits, with every process it started, before that build could
    finish (the catalog is still not written). The positive control: the same tree served to
    the end answers ``skill_list`` with the neighbour (each heavy one refused, and reported), and
    writes the catalog."""
    root = _hostile_tree(tmp_path / "skills")
    cache = tmp_path / "cache"
    proc = _hostile_server(root, cache, tmp_path, tmp_path / "stderr-cut")
    try:
        time.sleep(1.0)  # the background build is well under way: the SDK is loaded and serving
        _send(proc, {"id": 2, "method": "ping"})
        assert _answer(proc, 2).get("result") == {}
        assert "catalog" not in _written(cache)  # answered while the build was still reading
        started = psutil.Process(proc.pid).children(recursive=True)
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(WAIT_S) == 0
    finally:
        _reap(proc)
    assert "catalog" not in _written(cache)  # it did not wait for the build to finish
    assert not [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    control_cache = tmp_path / "control-cache"
    control = _hostile_server(root, control_cache, tmp_path, tmp_path / "stderr-control")
    try:
        _send(control, {"id": 2, "method": "tools/call", "params": {"name": "skill_list", "arguments": {"limit": 20}}})
        result = _answer(control, 2)["result"]
        assert isinstance(result, dict)
        listed = result["structuredContent"]
        assert [entry["name"] for entry in listed["skills"]] == ["ok"]
        assert {p["reason"] for p in listed["problems"]} == {"frontmatter-parse"}
        assert len(listed["problems"]) == HEAVY
    finally:
        _reap(control)
    assert "catalog" in _written(control_cache)


def test_one_build_whoever_comes_first(tree: Path) -> None:
    provider = LazyCatalog(load_settings([str(tree)], {"SKILL_MCP_CACHE": "off"}))
    builds: list[float] = []
    provider.observe_builds(lambda _catalog, seconds: builds.append(seconds))
    search = SearchState()
    thread = prebuild(provider, search)
    assert thread is not None
    first = provider()  # a request racing the prebuild: one of them builds, the other waits
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert len(builds) == 1
    assert provider() is first
    assert search.built_for(first) is not None


def test_a_built_or_self_building_provider_is_left_alone(tree: Path) -> None:
    provider = LazyCatalog(load_settings([str(tree)], {"SKILL_MCP_CACHE": "off"}))
    catalog = provider()
    assert prebuild(provider) is None  # built already
    assert prebuild(lambda: catalog) is None  # no ``built``: a provider that builds on its own


class _Failing:
    """A provider whose build fails the first time, as a scan that raised would."""

    built = False

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self) -> object:
        with self.lock:
            self.calls += 1
        raise OSError(5, "the scan failed")


def test_a_failed_prebuild_leaves_the_build_to_the_first_request(caplog: pytest.LogCaptureFixture) -> None:
    provider = _Failing()
    with caplog.at_level(logging.INFO, logger="skill_mcp.server"):
        thread = prebuild(provider)  # type: ignore[arg-type]
        assert thread is not None
        thread.join(WAIT_S)
    assert not thread.is_alive()
    assert provider.calls == 1
    assert any("not built ahead of the first request" in r.getMessage() for r in caplog.records)
    with pytest.raises(OSError):  # the first request meets the failure itself, and reports it
        provider()
