"""The cold scan over worker processes gives the serial scan's catalog, and falls back to it.

``parallel_scan.preload`` loads shares of the candidates in worker processes (forked when the
process is single-threaded, spawned otherwise); every share a worker does not deliver is loaded
serially by the discovery loop. These tests force the parallel path on a small catalog (with
refused skills among the good ones) and compare it with the serial one, then break the workers
every way the module guards against.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.catalog import discover, parallel_scan
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from tests.catalog import mixed_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mixed_corpus.make(tmp_path_factory.mktemp("corpus"))


def _catalog(root: Path, monkeypatch: pytest.MonkeyPatch, *, parallel: bool) -> Catalog:
    calls: list[int] = []
    real = parallel_scan.preload

    def forced(jobs: list[parallel_scan.Job]) -> Any:
        calls.append(len(jobs))
        return real(jobs, workers=3, min_skills=1) if parallel else parallel_scan.Preloaded()

    with monkeypatch.context() as m:
        m.setattr(discover, "preload", forced)
        catalog = discover.build_catalog(load_settings([str(root)], {}))
    assert calls, "the discovery loop did not ask for a preload"
    return catalog


def _same(a: Catalog, b: Catalog) -> bool:
    return (a.skills, a.problems, a.roots, a.packs) == (b.skills, b.problems, b.roots, b.packs)


@pytest.mark.parametrize(("forked", "chunk"), [(True, 256), (False, 256), (True, 4), (False, 4)])
def test_workers_give_the_serial_catalog(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, forked: bool, chunk: int
) -> None:
    serial = _catalog(corpus, monkeypatch, parallel=False)
    monkeypatch.setattr(parallel_scan, "CHUNK", chunk)  # several chunks a worker, decoded as asked
    monkeypatch.setattr(parallel_scan, "single_threaded", lambda: forked)  # else spawned
    spied: list[int] = []
    collect = parallel_scan._collect

    def spy(chunk: list[parallel_scan.Job], process: Any, conn: Any, into: parallel_scan.Preloaded, size: int) -> None:
        before = len(into)
        collect(chunk, process, conn, into, size)
        spied.append(len(into) - before)

    monkeypatch.setattr(parallel_scan, "_collect", spy)
    parallel = _catalog(corpus, monkeypatch, parallel=True)
    assert spied and all(spied), "no worker delivered its share"  # the parallel path really ran
    assert _same(parallel, serial)
    assert len(serial.skills) >= 40 and serial.problems


def test_no_process_to_be_had_means_a_serial_scan(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = _catalog(corpus, monkeypatch, parallel=False)

    def refuse(self: Any) -> None:
        raise BlockingIOError(11, "Resource temporarily unavailable")  # RLIMIT_NPROC's EAGAIN

    monkeypatch.setattr("multiprocessing.process.BaseProcess.start", refuse)
    assert _same(_catalog(corpus, monkeypatch, parallel=True), serial)


@pytest.mark.parametrize("answer", [b"garbage", None])
def test_a_worker_that_answers_garbage_or_dies_costs_only_time(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, answer: bytes | None
) -> None:
    serial = _catalog(corpus, monkeypatch, parallel=False)
    monkeypatch.setattr(parallel_scan, "single_threaded", lambda: True)

    def broken(conn: Any, jobs: Any, size: int) -> None:
        if answer is not None:
            conn.send_bytes(answer)
        conn.close()  # a worker that dies says nothing

    monkeypatch.setattr(parallel_scan, "_worker", broken)
    assert _same(_catalog(corpus, monkeypatch, parallel=True), serial)


def test_a_planted_difference_is_seen(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # negative control
    serial = _catalog(corpus, monkeypatch, parallel=False)
    monkeypatch.setattr(parallel_scan, "single_threaded", lambda: True)
    load = parallel_scan.load_share

    def drop_problems(jobs: list[parallel_scan.Job]) -> Any:
        from dataclasses import replace

        return [replace(loaded, problems=()) for loaded in load(jobs)]

    monkeypatch.setattr(parallel_scan, "load_share", drop_problems)
    assert not _same(_catalog(corpus, monkeypatch, parallel=True), serial)


def test_small_catalogs_and_single_cores_stay_serial() -> None:
    jobs = [(f"/r/s{i}", f"/r/s{i}", "/r") for i in range(10)]
    assert len(parallel_scan.preload(jobs)) == 0  # below MIN_SKILLS: nothing is started
    assert len(parallel_scan.preload(jobs, workers=1, min_skills=1)) == 0


@pytest.mark.parametrize(
    ("cores", "others", "expected"),
    [
        (2, 0, 2),
        (2, 1, 1),
        (2, 4, 1),
        (4, 0, 4),
        (4, 1, 3),
        (4, 3, 1),
        (1, 0, 1),
    ],
)
def test_workers_start_only_for_cores_the_other_work_leaves_idle(
    monkeypatch: pytest.MonkeyPatch, cores: int, others: int, expected: int
) -> None:
    monkeypatch.setattr(parallel_scan, "_others_runnable", lambda: others)
    assert parallel_scan.free_cores(cores) == expected


@pytest.mark.parametrize(
    ("text", "load", "expected"),
    [
        ("0.04 0.54 0.81 1/130 16664\n", 3.0, 0),  # this reader alone runs: the load average is history
        ("2.10 1.50 0.81 3/130 16664\n", 0.0, 2),  # two others run now
        ("garbage\n", 2.2, 2),  # unreadable: the load average decides
    ],
)
def test_what_runs_now_is_read_from_the_kernel_not_the_minute_average(
    monkeypatch: pytest.MonkeyPatch, text: str, load: float, expected: int
) -> None:
    import io

    monkeypatch.setattr(parallel_scan, "open", lambda *a, **k: io.StringIO(text), raising=False)
    monkeypatch.setattr("os.getloadavg", lambda: (load, load, load))
    assert parallel_scan._others_runnable() == expected


def test_without_procfs_the_load_average_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_proc(*_a: object, **_k: object) -> object:
        raise FileNotFoundError("/proc/loadavg")

    monkeypatch.setattr(parallel_scan, "open", no_proc, raising=False)
    monkeypatch.setattr("os.getloadavg", lambda: (0.3, 0.3, 0.3))
    assert parallel_scan.free_cores(2) == 2
    monkeypatch.setattr("os.getloadavg", lambda: (1.6, 1.6, 1.6))
    assert parallel_scan.free_cores(2) == 1


def test_a_busy_machine_scans_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel_scan, "_others_runnable", lambda: 3)
    monkeypatch.setattr(parallel_scan, "cores", lambda: 2)
    started: list[object] = []
    monkeypatch.setattr("multiprocessing.process.BaseProcess.start", lambda self: started.append(self))
    jobs = [(f"/r/s{i}", f"/r/s{i}", "/r") for i in range(10)]
    assert len(parallel_scan.preload(jobs, min_skills=1)) == 0
    assert not started


def test_a_chunk_that_does_not_decode_costs_only_its_own_jobs(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = _catalog(corpus, monkeypatch, parallel=False)
    monkeypatch.setattr(parallel_scan, "single_threaded", lambda: True)
    monkeypatch.setattr(parallel_scan, "CHUNK", 3)
    add_chunk = parallel_scan.Preloaded.add_chunk
    bad: list[int] = []

    def garble(self: parallel_scan.Preloaded, jobs: list[parallel_scan.Job], raw: bytes) -> None:
        if not bad:  # the first chunk a worker sends is garbage; the rest are good
            bad.append(len(jobs))
            raw = pickle.dumps(["short"])
        add_chunk(self, jobs, raw)

    monkeypatch.setattr(parallel_scan.Preloaded, "add_chunk", garble)
    assert _same(_catalog(corpus, monkeypatch, parallel=True), serial)
    assert bad == [3]


def test_preloaded_hands_each_result_once_and_the_rest_to_the_caller() -> None:
    from skill_mcp.catalog.skill import Loaded

    one = Loaded(None, ())
    jobs = [(f"/r/s{i}", f"/r/s{i}", "/r") for i in range(5)]
    got = parallel_scan.Preloaded()
    got.add(jobs[:1], [one])
    got.add_chunk(jobs[1:3], pickle.dumps([one, one]))
    got.add_chunk(jobs[3:], b"not a pickle")
    assert len(got) == 5
    assert got.pop(jobs[0]) == one and got.pop(jobs[0]) is None
    assert got.pop(jobs[2]) == one and got.pop(jobs[1]) == one and got.pop(jobs[1]) is None
    assert got.pop(jobs[3]) is None and got.pop(jobs[4]) is None  # the caller loads these
