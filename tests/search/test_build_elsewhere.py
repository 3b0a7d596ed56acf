"""The body phase in a worker process (``search.offload``, ``search.worker``): the index it
writes is opened only after the checks a warm start makes, answers after the swap equal a
one-phase build, and whenever no worker delivers the server builds in its own thread.

Which path built the complete index shows in its postings: an index the server built itself
holds a ``dict``; one a worker wrote is opened from its file (``store._Stored``). Every test
that expects one path asserts the other was not taken.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.search import BuildAbandoned, SearchIndex, index_catalog, offload, search_result
from skill_mcp.search.offload import build_elsewhere
from skill_mcp.search.store import HEADER_BYTES, index_file, load
from skill_mcp.surfaces.search_tool import SearchState
from tests.helpers import alive
from tests.search.quality import labelled
from tests.serve import serve_argv

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
QUERIES = [q for q, _ in labelled(HERE / "queries.tsv")]


def _catalog(root: Path) -> Catalog:
    return build_catalog(load_settings([str(root)], {"SKILL_MCP_CACHE": "off"}))


def _from_a_file(index: SearchIndex) -> bool:
    return not isinstance(index.postings, dict)


def _one_phase(catalog: Catalog, queries: Sequence[str]) -> list[dict[str, Any]]:
    whole = index_catalog(catalog)
    return [search_result(catalog, whole, q, 10) for q in queries]


async def _complete(state: SearchState, catalog: Catalog, queries: Sequence[str]) -> tuple[list[dict[str, Any]], bool]:
    """(the answers once the bodies are in, whether the complete index came from a worker's file)"""
    assert (await state.answer(catalog, queries[0], 10))["coverage"] == "partial"
    assert state.wait_complete(120)
    built = state.built_for(catalog)
    assert built is not None and built[1] is True
    return [await state.answer(catalog, q, 10) for q in queries], _from_a_file(built[0])


@pytest.mark.parametrize("cached", [False, True])
async def test_the_worker_builds_the_index_and_answers_equal_a_one_phase_build(cached: bool, tmp_path: Path) -> None:
    catalog = _catalog(CORPUS)
    state = SearchState(tmp_path / "c" if cached else None, two_phase_from=0)
    after, from_worker = await _complete(state, catalog, QUERIES)
    assert from_worker  # built by the worker, opened from its file
    assert after == _one_phase(catalog, QUERIES)
    # Control: the thread build (the fallback) gives the same answers from an in-memory index.
    here, from_worker = await _complete(SearchState(two_phase_from=0, elsewhere=False), catalog, QUERIES)
    assert not from_worker and here == after


def _no_process(*args: Any, **kwargs: Any) -> Any:
    raise BlockingIOError(11, "Resource temporarily unavailable")  # what fork says at RLIMIT_NPROC


@pytest.mark.parametrize(
    "how",
    ["rlimit", "no-executable", "killed", "fails", "bad-order"],
)
async def test_without_a_worker_that_delivers_the_server_builds_in_its_thread(
    how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    catalog = _catalog(CORPUS)
    if how == "rlimit":
        monkeypatch.setattr("skill_mcp.search.offload.subprocess.Popen", _no_process)
    elif how == "no-executable":
        monkeypatch.setattr(offload, "worker_argv", lambda: [str(tmp_path / "no-python")])
    elif how == "killed":
        argv = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
        monkeypatch.setattr(offload, "worker_argv", lambda: argv)
    elif how == "fails":
        monkeypatch.setattr(offload, "worker_argv", lambda: [sys.executable, "-c", "raise SystemExit(1)"])
    else:  # a build order the worker cannot read: its own exit status says so
        monkeypatch.setattr("skill_mcp.search.offload.pickle.dumps", lambda *a, **k: b"not a pickle")
    state = SearchState(tmp_path / "c", two_phase_from=0)
    after, from_worker = await _complete(state, catalog, QUERIES[:40])
    assert not from_worker
    assert after == _one_phase(catalog, QUERIES[:40])


def test_a_worker_killed_while_it_builds_is_not_used_and_leaves_no_file(tmp_path: Path) -> None:
    catalog = _catalog(CORPUS)
    seen: list[subprocess.Popen[bytes]] = []

    def kill(proc: subprocess.Popen[bytes]) -> None:
        seen.append(proc)
        proc.send_signal(signal.SIGKILL)

    assert build_elsewhere(catalog, tmp_path / "c", lambda: True, started=kill) is None
    assert seen and seen[0].returncode == -signal.SIGKILL
    assert not index_file(tmp_path / "c", catalog.roots).exists()
    # Control: the same call with the worker left alone delivers.
    assert build_elsewhere(catalog, tmp_path / "c", lambda: True) is not None


def test_the_worker_imports_the_servers_code_whatever_the_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A server whose package is found other than by the environment (a path added in
    process, say) still starts a worker that imports this very package."""
    import skill_mcp

    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    env = offload.worker_env()
    paths = env["PYTHONPATH"].split(os.pathsep)
    assert Path(paths[0], "skill_mcp") == Path(skill_mcp.__file__).resolve().parent and paths[1] == str(tmp_path)
    monkeypatch.delenv("PYTHONPATH")
    assert Path(offload.worker_env()["PYTHONPATH"], "skill_mcp") == Path(skill_mcp.__file__).resolve().parent


def test_a_build_whose_catalog_is_replaced_kills_its_worker(tmp_path: Path) -> None:
    catalog = _catalog(CORPUS)
    seen: list[subprocess.Popen[bytes]] = []
    with pytest.raises(BuildAbandoned):
        build_elsewhere(catalog, tmp_path / "c", lambda: False, started=seen.append)
    assert seen and seen[0].returncode == -signal.SIGKILL  # killed, not left to finish
    assert not index_file(tmp_path / "c", catalog.roots).exists()


# A worker that writes an index under the rules but for the wrong thing: ``damage`` says what.
_LIAR = """
import os, sys
from pathlib import Path
from skill_mcp.search import worker
from skill_mcp.search.offload import record
from skill_mcp.search.source import build_keyed
from skill_mcp.search.store import HEADER_BYTES, save
order = __import__("pickle").loads(worker._read_exactly(0, int.from_bytes(worker._read_exactly(0, 8), "big")))
damage = sys.argv[1]
items = [(f, k, record(s)) for f, k, s in order["items"]]
if damage == "other-content":  # the index of fewer skills, under the key of them all
    index, key, _ = build_keyed(items[1:], 0)
    _, key, _ = build_keyed(items, 0)
else:
    index, key, _ = build_keyed(items, 0)
if damage == "wrong-key":
    key = key.replace(":", ":0", 1)[:-1]
path = Path(order["path"])
save(path, key, index)
if damage == "checksum":
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
"""


@pytest.mark.parametrize("damage", ["wrong-key", "checksum"])
async def test_a_worker_index_that_fails_verification_is_not_used(
    damage: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    catalog = _catalog(CORPUS)
    time.sleep(0.01)
    monkeypatch.setattr(offload, "worker_argv", lambda: [sys.executable, "-c", _LIAR, damage])
    state = SearchState(tmp_path / "c", two_phase_from=0)
    after, from_worker = await _complete(state, catalog, QUERIES[:40])
    assert not from_worker  # refused, then built in the thread
    assert after == _one_phase(catalog, QUERIES[:40])


def test_the_verification_is_what_refuses_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Negative control: the file a lying worker wrote is a real index; opened by the key it
    carries instead of the key of the catalog served, it would give other answers."""
    catalog = _catalog(CORPUS)
    cache = tmp_path / "c"
    monkeypatch.setattr(offload, "worker_argv", lambda: [sys.executable, "-c", _LIAR, "wrong-key"])
    assert build_elsewhere(catalog, cache, lambda: True) is None
    path = index_file(cache, catalog.roots)
    written = load(path, json.loads(path.read_bytes()[:HEADER_BYTES])["key"])
    assert written is not None
    # A worker that lies about the content under the right key is what the key cannot see:
    # the catalog's stamps and fields are all the key holds, as for a warm start's file.
    monkeypatch.setattr(offload, "worker_argv", lambda: [sys.executable, "-c", _LIAR, "other-content"])
    lied = build_elsewhere(catalog, cache, lambda: True)
    assert lied is not None and lied.names != index_catalog(catalog).names


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                out.append(int(entry))
    return out


def _is_worker(pid: int) -> bool:
    try:
        return b"skill_mcp.search.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _slow_tree(root: Path, n: int = 300) -> Path:
    """Enough skills and body words that the worker is still building when the test stops it."""
    words = [f"word{i}x{j}" for i in range(40) for j in range(40)]
    for i in range(n):
        path = root / f"skill-{i:04d}" / "SKILL.md"
        path.parent.mkdir(parents=True)
        body = " ".join(words[(i * 7 + k) % len(words)] for k in range(4000))
        path.write_text(f"---\nname: skill-{i:04d}\ndescription: Tool {i} for work.\n---\n# Notes\n\n{body}\n")
    return root


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_the_worker_dies_with_the_server(how: signal.Signals, tmp_path: Path) -> None:
    root = _slow_tree(tmp_path / "skills")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SKILL_MCP_LOG": "warning",
        "SKILL_MCP_CACHE_DIR": str(tmp_path / "c"),
    }
    proc = subprocess.Popen(
        serve_argv([str(root)]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for message in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "skill_search", "arguments": {"query": "word3x4"}},
            },
        ):
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert answers[1]["result"]["structuredContent"]["coverage"] == "partial"
        deadline = time.monotonic() + 30
        workers: list[int] = []
        while not workers and time.monotonic() < deadline:
            workers = [p for p in _children(proc.pid) if _is_worker(p)]
            time.sleep(0.02)
        assert workers, "the body phase runs in a worker process"
        # Past its set-up (``PR_SET_PDEATHSIG`` set, the stdin watcher thread started), then
        # stopped: it cannot finish its build and exit on its own meanwhile.
        while any(len(os.listdir(f"/proc/{pid}/task")) < 2 for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        proc.send_signal(how)
        proc.wait(30)
        deadline = time.monotonic() + 10
        while any(map(alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [pid for pid in workers if alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, "a worker outlived its server"
        # Killed halfway, it left at most its private temporary file, never the index's name.
        assert not index_file(tmp_path / "c", _catalog(root).roots).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def test_with_no_cache_directory_the_worker_s_scratch_directory_is_removed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The private directory the worker wrote into is gone once the index is open (removed by the
    iterative removal, ``trees.remove_tree``), and the index opened from it still answers."""
    import tempfile

    made: list[str] = []
    real = tempfile.mkdtemp

    def mkdtemp(*args: object, **kwargs: object) -> str:
        made.append(real(dir=str(tmp_path), prefix="scratch-"))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    catalog = _catalog(CORPUS)
    index = build_elsewhere(catalog, None, lambda: True)
    assert index is not None and made
    assert not Path(made[0]).exists()
    assert search_result(catalog, index, QUERIES[0], 10) == _one_phase(catalog, QUERIES[:1])[0]
