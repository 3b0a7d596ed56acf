"""The peers' harness reports what happened: a failing server as failed, with its error; an absent
venv as not set up; a set-up peer's answer counted. Real processes through the SDK's stdio client.

The peers themselves are set up only by ``python -m bench.peers --setup`` (outside the tree); the
test that runs them is skipped where their venvs are absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from bench import peers
from bench.corpus import generate
from bench.servers import ServerSpec, floor_spec

pytestmark = pytest.mark.timeout(300)


def _tools_list_peer() -> peers.Peer:
    return peers.Peer("probe", (), (3, 10), "test", "tools/list", None)


def test_a_server_that_dies_is_reported_failed_with_its_error(tmp_path: Path) -> None:
    runs = peers.ServerRuns("tools/list")
    dies = ServerSpec(
        "dies", (sys.executable, "-c", "import sys; sys.stderr.write('no skills root here\\n'); sys.exit(3)")
    )
    anyio.run(peers._peer, runs, _tools_list_peer(), dies, 10, tmp_path / "dies.log")
    assert runs.answer == [] and runs.ready == []
    assert "no skills root here" in runs.error
    # Positive control: the same path on a server that answers records a figure and no error.
    ok = peers.ServerRuns("tools/list")
    anyio.run(peers._peer, ok, _tools_list_peer(), floor_spec(), 10, tmp_path / "floor.log")
    assert ok.error == "" and len(ok.answer) == len(ok.ready) == 1 and ok.answer[0] >= ok.ready[0] > 0


@pytest.mark.slow
def test_an_absent_venv_is_not_set_up_and_a_failed_peer_is_not_a_winner(tmp_path: Path) -> None:
    corpus = generate(tmp_path / "corpus", 12)
    result = anyio.run(peers.measure, "12", corpus.root, 1, [peers.PEERS["skills-mcp"]], tmp_path / "none", 12)
    assert result.skipped == ["skills-mcp"] and result.failed == []
    assert result.servers["skills-mcp"].skipped.startswith("not set up")
    assert [name for name, _ in peers.rank(result, "warm")] == ["ours (warm)"]
    rows = "\n".join(peers.table([result]))
    assert "| 12 | skills-mcp | | | not set up" in rows
    assert result.servers["ours (cold)"].entries == result.servers["ours (warm)"].entries == 12


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(peers.PEERS))
def test_a_set_up_peer_lists_the_corpus(tmp_path: Path, name: str) -> None:
    peer = peers.PEERS[name]
    why = peers.set_up(peer, peers.PEERS_DIR)
    if why is not None:
        pytest.skip(f"{name}: {why}")
    corpus = generate(tmp_path / "corpus", 12)  # none nested (one in fifty is): every peer sees all twelve
    result = anyio.run(peers.measure, "test-12", corpus.root, 1, [peer], peers.PEERS_DIR, 12)
    runs = result.servers[name]
    assert runs.error == "", runs.error
    assert len(runs.answer) == 1 and runs.entries == 12
