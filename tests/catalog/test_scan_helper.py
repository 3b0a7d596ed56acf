"""A cold scan shared with the scan helper gives the serial scan's catalog, and falls back to it.

``parallel_scan.with_helper`` hands the job list to a helper process (``scan_helper``: forked at
the server's start, or here, single-threaded, when the build asks) which loads chunks from the
end while the discovery loop loads from the front, taking the chunks the helper delivered. These
tests force the helper on a small catalog (refused skills among the good ones, chunks of a few
skills), compare the catalog with the serial one, and break the helper every way the server
guards against: no fork, a helper that dies, is slow, answers garbage or mismatched chunks. A
planted difference in what the helper loads must be seen (the comparison can fail).

The helper is a fork of this test process, so a patch made before it starts is the helper's too.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.catalog import discover, parallel_scan, scan_helper
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from tests.catalog import mixed_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mixed_corpus.make(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(scan_helper, "CHUNK", 3)  # many chunks for a 44-skill catalog
    monkeypatch.setattr(scan_helper, "single_threaded", lambda: True)  # the test process may run threads
    monkeypatch.setattr(scan_helper, "cores", lambda: 2)
    monkeypatch.setattr(scan_helper, "NICE", 0)  # a busy test machine must not starve the helper
    yield
    scan_helper.dismiss()


def _serial(root: Path, monkeypatch: pytest.MonkeyPatch) -> Catalog:
    with monkeypatch.context() as m:
        m.setattr(discover, "preload", lambda jobs: parallel_scan.Preloaded())
        return discover.build_catalog(load_settings([str(root)], {}))


def _helped(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Catalog, int]:
    """The catalog built with the helper forced on; how many skills the helper delivered."""
    delivered: list[int] = []
    close = parallel_scan.HelperShare.close

    def spy(self: parallel_scan.HelperShare) -> None:
        delivered.append(self._delivered)
        close(self)

    real = parallel_scan.preload
    with monkeypatch.context() as m:
        m.setattr(parallel_scan.HelperShare, "close", spy)
        m.setattr(discover, "preload", lambda jobs: real(jobs, helper_from=1))
        catalog = discover.build_catalog(load_settings([str(root)], {}))
    assert delivered, "the build did not share its scan with a helper"
    return catalog, delivered[0]


def _same(a: Catalog, b: Catalog) -> bool:
    return (a.skills, a.problems, a.roots, a.packs) == (b.skills, b.problems, b.roots, b.packs)


def _slow_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The discovery loop's own loads (``discover.load_skill``, not the helper's) take longer, so
    the helper surely delivers chunks before the two meet."""
    load = discover.load_skill  # the loop's own name for it

    def slow(*args: Any) -> Any:
        time.sleep(0.005)
        return load(*args)

    monkeypatch.setattr(discover, "load_skill", slow)


def test_the_helper_gives_the_serial_catalog(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = _serial(corpus, monkeypatch)
    _slow_here(monkeypatch)
    helped, delivered = _helped(corpus, monkeypatch)
    assert delivered > 0  # the helper's chunks were taken (the shared path really ran)
    assert _same(helped, serial)
    assert len(serial.skills) >= 40 and serial.problems


def _reaped(helper: scan_helper.Helper) -> bool:
    assert helper.closed and helper.reaper is not None
    helper.reaper.join(30)
    try:
        os.waitpid(helper.pid, os.WNOHANG)
    except ChildProcessError:
        return True  # reaped: no zombie left
    return False


def test_a_helper_forked_and_primed_before_the_build_is_used(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's way: forked first (as ``serve_stdio_early`` does), the scanner imported at
    once when nothing is cached, then handed the jobs by the first build."""
    serial = _serial(corpus, monkeypatch)
    assert scan_helper.start(prime=True)
    helper = scan_helper.waiting()
    assert helper is not None and helper.primed
    _slow_here(monkeypatch)
    helped, delivered = _helped(corpus, monkeypatch)
    assert scan_helper.waiting() is None  # taken by the build, and closed by it
    assert delivered > 0 and _same(helped, serial)
    assert _reaped(helper)


def test_a_job_list_larger_than_the_pipe_is_sent_as_the_loop_goes(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the smallest pipe (a page), the job list goes in pieces between the loop's loads."""
    serial = _serial(corpus, monkeypatch)
    monkeypatch.setattr(scan_helper, "PIPE_BYTES", 4096)
    sent: list[int] = []
    send = parallel_scan.HelperShare._send

    def spy(self: parallel_scan.HelperShare, kind: bytes, payload: bytes) -> None:
        send(self, kind, payload)
        sent.append(len(self._outbox))

    monkeypatch.setattr(parallel_scan.HelperShare, "_send", spy)
    _slow_here(monkeypatch)
    helped, delivered = _helped(corpus, monkeypatch)
    assert sent and sent[0] > 0  # the first write left some of the job list for later
    assert delivered > 0 and _same(helped, serial)


def test_a_cache_directory_holding_a_catalog_is_likely_warm(tmp_path: Path) -> None:
    assert scan_helper.likely_cold(None)  # no cache: every build scans
    assert scan_helper.likely_cold(tmp_path / "not-yet")
    assert scan_helper.likely_cold(tmp_path)
    (tmp_path / "search-index-abc").write_bytes(b"")
    assert scan_helper.likely_cold(tmp_path)
    (tmp_path / "catalog-abc-def.v1").write_bytes(b"")
    assert not scan_helper.likely_cold(tmp_path)


def test_a_warm_build_dismisses_a_waiting_helper(corpus: Path, tmp_path: Path) -> None:
    settings = load_settings([str(corpus)], {"SKILL_MCP_CACHE_DIR": str(tmp_path)})
    discover.build_catalog(settings)  # fills the cache
    assert scan_helper.start()
    helper = scan_helper.waiting()
    assert helper is not None
    discover.build_catalog(settings)  # warm: the helper is not needed
    assert scan_helper.waiting() is None
    assert _reaped(helper)


def test_small_catalogs_dismiss_the_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    assert scan_helper.start()
    helper = scan_helper.waiting()
    assert helper is not None
    jobs = [(f"/r/s{i}", f"/r/s{i}", "/r") for i in range(10)]
    got = parallel_scan.preload(jobs)  # below HELPER_FROM
    assert not isinstance(got, parallel_scan.HelperShare) and len(got) == 0
    assert scan_helper.waiting() is None
    assert _reaped(helper)


def test_no_fork_means_a_serial_scan(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = _serial(corpus, monkeypatch)

    def refuse() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")  # RLIMIT_NPROC's EAGAIN

    monkeypatch.setattr(os, "fork", refuse)
    assert not scan_helper.start()
    real = parallel_scan.preload
    monkeypatch.setattr(discover, "preload", lambda jobs: real(jobs, helper_from=1))
    assert _same(discover.build_catalog(load_settings([str(corpus)], {})), serial)


def _broken(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Break the helper's side (patched before the fork, so in the helper only matters)."""
    load = parallel_scan.load_share
    calls: list[int] = []

    def dies(jobs: list[parallel_scan.Job]) -> Any:
        calls.append(1)
        if len(calls) > 1:
            os._exit(3)  # killed mid-scan: its started chunk never comes
        return load(jobs)

    def slow(jobs: list[parallel_scan.Job]) -> Any:
        time.sleep(0.2)  # far past the loop's patience for a started chunk
        return load(jobs)

    def short(jobs: list[parallel_scan.Job]) -> Any:
        return load(jobs)[:-1]  # a chunk that does not match its jobs

    if how == "dies":
        monkeypatch.setattr(parallel_scan, "load_share", dies)
    elif how == "slow":
        monkeypatch.setattr(parallel_scan, "load_share", slow)
    elif how == "short":
        monkeypatch.setattr(parallel_scan, "load_share", short)
    elif how == "garbage":
        monkeypatch.setattr(scan_helper, "_write_all", lambda fd, data: os.write(fd, b"?" * 64))
    elif how == "not-results":
        monkeypatch.setattr(parallel_scan, "load_share", lambda jobs: [None for _ in jobs])
    elif how == "unloadable":
        monkeypatch.setattr(parallel_scan, "load_share", lambda jobs: [_Unloadable() for _ in jobs])
    elif how == "bad-order":  # the job list itself does not arrive readable
        monkeypatch.setattr(pickle, "dumps", lambda *a, **k: b"not a pickle")


def _refuse() -> None:
    raise ValueError("this record cannot be decoded")


class _Unloadable:
    """Pickles fine in the helper; its ``pickle.loads`` in the server raises."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_refuse, ())


@pytest.mark.parametrize("how", ["dies", "slow", "short", "not-results", "garbage", "unloadable", "bad-order"])
def test_a_helper_that_fails_costs_only_time(corpus: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    serial = _serial(corpus, monkeypatch)
    with monkeypatch.context() as m:
        _broken(how, m)
        helped, delivered = _helped(corpus, m)
    assert _same(helped, serial)
    if how in ("short", "not-results", "garbage", "unloadable", "bad-order"):
        assert delivered == 0  # nothing it sent was taken


def test_a_planted_difference_is_seen(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # negative control
    serial = _serial(corpus, monkeypatch)
    load = parallel_scan.load_share

    def drop_descriptions(jobs: list[parallel_scan.Job]) -> Any:
        from dataclasses import replace

        return [
            replace(loaded, skill=None if loaded.skill is None else replace(loaded.skill, description=""))
            for loaded in load(jobs)
        ]

    _slow_here(monkeypatch)
    monkeypatch.setattr(parallel_scan, "load_share", drop_descriptions)
    helped, delivered = _helped(corpus, monkeypatch)
    assert delivered > 0 and not _same(helped, serial)


def test_the_helper_writes_nothing_on_stdout(tmp_path: Path) -> None:
    """Its fd 1 is fd 2 before anything runs: a print in the helper reaches stderr."""
    import subprocess
    import sys

    code = (
        "import os\n"
        "from skill_mcp.catalog import scan_helper\n"
        "scan_helper._import_scanner = lambda: print('from the helper', flush=True)\n"
        "assert scan_helper.start(prime=True)\n"
        "helper = scan_helper.take()\n"
        "helper.send(scan_helper.EXIT)\n"
        "os.waitpid(helper.pid, 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=True)
    assert done.stdout == b""
    assert b"from the helper" in done.stderr  # control: it did print


def test_the_helper_stops_before_a_chunk_the_loop_claimed() -> None:
    """The protocol itself: a claim of chunk 2 leaves chunks 0 and 1 to the helper, no more."""
    loaded: list[list[Any]] = []

    def load(jobs: list[Any]) -> list[Any]:
        loaded.append(jobs)
        return list(jobs)

    cmd_r, cmd_w = os.pipe()
    ans_r, ans_w = os.pipe()
    jobs = list(range(10))
    order = pickle.dumps((2, jobs))
    claim = (2).to_bytes(4, "big")
    os.write(cmd_w, scan_helper.JOBS + len(order).to_bytes(4, "big") + order)
    os.write(cmd_w, scan_helper.CLAIM + len(claim).to_bytes(4, "big") + claim)
    scan_helper.serve(cmd_r, ans_w, load)
    os.close(cmd_w)
    os.close(ans_w)
    assert loaded == [[8, 9], [6, 7]]
    answers = b""
    while chunk := os.read(ans_r, 65536):
        answers += chunk
    os.close(ans_r)
    os.close(cmd_r)
    assert answers.count(scan_helper.STARTED + (0).to_bytes(4, "big")) == 1
    assert pickle.loads(answers[9 + 9 :][: int.from_bytes(answers[14:18], "big")]) == [8, 9]


@pytest.mark.parametrize(("cores", "others", "helped"), [(4, 0, False), (4, 2, True), (2, 0, True)])
def test_more_than_two_idle_cores_leave_a_large_scan_to_worker_processes(
    monkeypatch: pytest.MonkeyPatch, cores: int, others: int, helped: bool
) -> None:
    assert scan_helper.start()
    monkeypatch.setattr(parallel_scan, "cores", lambda: cores)
    monkeypatch.setattr(parallel_scan, "_others_runnable", lambda: others)
    jobs = [(f"/r/s{i}", f"/r/s{i}", "/r") for i in range(parallel_scan.MIN_SKILLS)]
    shared = parallel_scan.with_helper(jobs)
    try:
        assert (shared is not None) is helped
        assert scan_helper.waiting() is None  # taken, or dismissed
    finally:
        if shared is not None:
            shared.close()


def test_a_cache_that_lacks_many_candidates_shares_their_scan(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm cache written before the catalog grew: the candidates it has no entry for are
    handed to the helper, and the catalog is the one a serial build makes from the same cache."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(corpus, root, symlinks=True)
    time.sleep(0.2)  # past the cache's racy margin (50 ms): the first builds may write their entries
    settings = {name: load_settings([str(root)], {"SKILL_MCP_CACHE_DIR": str(tmp_path / name)}) for name in ("a", "b")}
    for each in settings.values():
        discover.build_catalog(each)  # both caches hold the first 44
    for name in sorted(p.name for p in corpus.iterdir() if (p / "SKILL.md").is_file())[:30]:
        text = (corpus / name / "SKILL.md").read_text().replace(f"name: {name}", f"name: grown-{name}", 1)
        (root / f"grown-{name}").mkdir()
        (root / f"grown-{name}" / "SKILL.md").write_text(text)
    monkeypatch.setattr(discover, "HELPER_FROM", 20)
    serial = _serial_with(settings["b"], monkeypatch)
    asked: list[int] = []
    real = parallel_scan.preload

    def spy(jobs: list[parallel_scan.Job]) -> parallel_scan.Preloaded:
        asked.append(len(jobs))
        return real(jobs, helper_from=1)

    delivered: list[int] = []
    close = parallel_scan.HelperShare.close

    def counted(self: parallel_scan.HelperShare) -> None:
        delivered.append(self._delivered)
        close(self)

    _slow_here(monkeypatch)
    monkeypatch.setattr(parallel_scan.HelperShare, "close", counted)
    monkeypatch.setattr(discover, "preload", spy)
    helped = discover.build_catalog(settings["a"])
    assert asked == [30]  # the grown candidates only
    assert delivered and delivered[0] > 0
    assert _same(helped, serial)
    assert len(helped.skills) == len(serial.skills) > 60  # the grown ones are served


def _serial_with(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Catalog:
    with monkeypatch.context() as m:
        m.setattr(discover, "preload", lambda jobs: parallel_scan.Preloaded())
        return discover.build_catalog(settings)


def test_a_server_s_helper_is_primed_when_cold_and_checks_stamps_when_warm(corpus: Path, tmp_path: Path) -> None:
    """``start_for``: nothing cached, the helper imports the scanner at once (primed) and has no
    verdicts to give; a catalog cached, it checks that cache's stamps (a verdicts pipe) and
    imports nothing yet."""
    assert scan_helper.start_for(tmp_path / "empty", [corpus])
    helper = scan_helper.waiting()
    assert helper is not None and helper.primed and helper.verdicts is None
    scan_helper.dismiss()
    cache = tmp_path / "cache"
    discover.build_catalog(load_settings([str(corpus)], {"SKILL_MCP_CACHE_DIR": str(cache)}))
    assert not scan_helper.start_for(cache, [corpus])
    helper = scan_helper.waiting()
    assert helper is not None and not helper.primed and helper.verdicts is not None
    assert not scan_helper.start_for(cache, [corpus])  # one waits already: no second fork
    assert scan_helper.waiting() is helper
