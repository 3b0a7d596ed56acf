"""The cold scan of a large catalog over the machine's cores.

With no catalog cache to reuse, every skill is read (``skill.load_skill``), a few hundred
microseconds of CPU each. For ``MIN_SKILLS`` candidates or more, on a machine with a core the
rest of its work leaves idle (``free_cores``: by the tasks runnable now; a busy machine scans
serially), ``preload`` loads the candidates in shares: the calling process loads the first share
itself while worker processes load the others, each returning its results as pickled lists of
``CHUNK`` ``Loaded`` records, each decoded by the caller when it first needs one of them
(``Preloaded``; a ``pickle.loads`` costs about a tenth of the load).

How workers start: by ``fork`` only when the process is single-threaded (``/proc/self/task``
lists one task: the command-line tools), since a fork with other threads alive can copy a lock
one of them holds; otherwise (the server scans in a loader thread while the SDK may still be
importing in another) by ``spawn``, a fresh interpreter that imports this module, whose start
costs the worker tens of milliseconds and the caller next to nothing. A worker writes nothing
on standard output (its descriptor 1 is pointed at standard error first: the server's stdout
carries the protocol).

Whatever goes wrong - no process can be made (RLIMIT_NPROC, a seccomp filter), a worker dies,
times out or answers garbage - the share it held is simply missing from the answer, and the
caller loads every missing candidate serially, as it always did. The catalog is the same
either way (a test compares the two).
"""

from __future__ import annotations

import logging
import os
import pickle
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skill_mcp.catalog.skill import Loaded, load_skill

if TYPE_CHECKING:  # pragma: no cover - typing only
    from multiprocessing.connection import Connection

log = logging.getLogger("skill_mcp.catalog")

# Below this many candidates the serial scan is done about when a spawned worker is ready.
MIN_SKILLS = 1500
# A worker that has not answered after this long (plus a share of its load) is given up on.
TIMEOUT_S = 30.0
TIMEOUT_PER_SKILL_S = 0.005
# Records a worker pickles and sends at once (``Preloaded``).
CHUNK = 256

Job = tuple[str, str, str]  # (real directory, where it was found, the root's real path)


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def free_cores(cores: int) -> int:
    """How many processes a scan may run at once without waiting for a core: this one, plus one
    per core the other work leaves idle now. *Now* is the kernel's count of runnable tasks
    (``/proc/loadavg``'s fourth field, this reader included), not the one-minute load average:
    that average trails a busy spell by a minute, long after its work has stopped (in the
    benchmark it kept every cold start serial), and trails a new one as long. Without procfs,
    the load average decides. A worker on a busy machine only queues behind the other work and
    adds its start and its answer's copy to the scan's wall time (at 10,000 skills under a load
    average of 2.4-4.3 on two cores: 7.7 s against 6.2 s serial)."""
    others = _others_runnable()
    return max(1, min(cores, cores - others))


def _others_runnable() -> int:
    """Tasks runnable now besides the one asking (``/proc/loadavg``), or the one-minute load
    average where that cannot be read (then every core counts as busy if neither can)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            runnable = int(f.read().split()[3].split("/")[0])
        return max(runnable - 1, 0)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return round(os.getloadavg()[0])
    except (AttributeError, OSError):  # pragma: no cover - neither: assume busy
        return 1 << 30


def single_threaded() -> bool:
    """True when the process runs one thread of any kind (so a fork copies no held lock)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # pragma: no cover - no procfs: assume threads
        return False


def load_share(jobs: list[Job]) -> list[Loaded]:
    return [load_skill(Path(real), Path(found_at), Path(root)) for real, found_at, root in jobs]


def _worker(conn: Connection, jobs: list[Job], size: int) -> None:
    os.dup2(2, 1)  # nothing a worker prints may reach the protocol's stdout
    try:
        # All of the share is loaded before anything is sent: the caller reads only once its own
        # share is done, and a worker blocked on a full pipe would load nothing meanwhile.
        loaded = load_share(jobs)
        chunks = [
            pickle.dumps(loaded[start : start + size], protocol=pickle.HIGHEST_PROTOCOL)
            for start in range(0, len(loaded), size)
        ]
        del loaded
        for chunk in chunks:
            conn.send_bytes(chunk)
    finally:
        conn.close()


class Preloaded:
    """What the workers delivered, by job; ``pop`` as a dict's. A worker's answer is held as the
    pickled chunks it sent (about 1 KiB a skill) and a chunk is decoded when the discovery loop
    first asks for one of its jobs, in about the order it loads them: the scan holds a chunk's
    records at a time rather than a share's, whose transient parts (the stamps, the ``Loaded``
    records) would otherwise fragment the heap the catalog lives in (at 10,000 skills on two
    cores a share decoded at once left the process 30 MiB larger than a serial scan). A chunk
    that does not decode to as many records as it has jobs delivers none: the caller loads them."""

    __slots__ = ("_chunks", "_pending", "_ready")

    def __init__(self) -> None:
        self._ready: dict[Job, Loaded] = {}
        self._pending: dict[Job, int] = {}  # job -> index of the chunk that holds it
        self._chunks: list[tuple[list[Job], bytes] | None] = []

    def add(self, jobs: list[Job], results: list[Loaded]) -> None:
        self._ready.update(zip(jobs, results, strict=True))

    def add_chunk(self, jobs: list[Job], raw: bytes) -> None:
        at = len(self._chunks)
        self._chunks.append((jobs, raw))
        self._pending.update(dict.fromkeys(jobs, at))

    def __len__(self) -> int:
        return len(self._ready) + len(self._pending)

    def pop(self, job: Job, default: Loaded | None = None) -> Loaded | None:
        got = self._ready.pop(job, None)
        if got is not None:
            return got
        at = self._pending.pop(job, None)
        if at is None:
            return default
        self._decode(at)
        return self._ready.pop(job, default)

    def _decode(self, at: int) -> None:
        chunk = self._chunks[at]
        if chunk is None:
            return
        self._chunks[at] = None
        jobs, raw = chunk
        try:
            results = pickle.loads(raw)  # noqa: S301 - our own child's answer, over our own pipe
            if not isinstance(results, list) or len(results) != len(jobs):
                raise ValueError("a chunk does not match its jobs")
        except Exception as exc:  # whatever the failure, these jobs are loaded serially instead
            log.debug("a scan worker's chunk failed (%s): it is scanned serially", exc)
            return
        self._ready.update(zip(jobs, results, strict=True))


def jobs_of(queue: deque[tuple[str, str]], reals: Mapping[str, str], inside: Callable[[str, str], bool]) -> list[Job]:
    """The candidates the serial loop would load first, in its order: each real directory once,
    at the first place it was found, and none whose link leads out of its root."""
    jobs: list[Job] = []
    seen: set[str] = set()
    for found_at, root_real in queue:
        real = reals.get(found_at) or os.path.realpath(found_at)
        if real in seen or not inside(root_real, real):
            continue
        seen.add(real)
        jobs.append((real, found_at, root_real))
    return jobs


def preload(jobs: list[Job], *, workers: int | None = None, min_skills: int = MIN_SKILLS) -> Preloaded:
    """Load ``jobs`` over the cores; the results by job. A job missing from the answer (too few
    jobs, no idle core by ``free_cores`` unless ``workers`` says how many, workers not to be
    had, a worker failed) is for the caller to load."""
    out = Preloaded()
    if len(jobs) < min_skills:
        return out
    count = min(workers or free_cores(cores()), len(jobs))
    if count < 2:
        log.debug("no idle core: scanning serially", extra={"skills": len(jobs)})
        return out
    log.debug("scanning over %d processes", count, extra={"skills": len(jobs)})
    share = -(-len(jobs) // count)
    shares = [jobs[start : start + share] for start in range(0, len(jobs), share)]
    method = "fork" if single_threaded() else "spawn"
    started: list[tuple[list[Job], Any, Connection]] = []
    try:
        import multiprocessing  # imported here: only a large cold scan starts workers

        context: Any = multiprocessing.get_context(method)
        for chunk in shares[1:]:
            mine, theirs = context.Pipe(duplex=False)
            try:
                process = context.Process(
                    target=_worker, args=(theirs, chunk, CHUNK), daemon=True, name="skill-mcp-scan"
                )
                process.start()
            except BaseException:
                mine.close()
                raise
            finally:
                theirs.close()
            started.append((chunk, process, mine))
    except Exception as exc:  # any failure to start workers: the shares not started load serially
        log.debug("parallel scan unavailable (%s): scanning serially", exc)
    out.add(shares[0], load_share(shares[0]))
    for chunk, process, conn in started:
        _collect(chunk, process, conn, out, CHUNK)
    return out


def _collect(chunk: list[Job], process: Any, conn: Connection, into: Preloaded, size: int = CHUNK) -> None:
    try:
        wait = TIMEOUT_S + TIMEOUT_PER_SKILL_S * len(chunk)
        received = []
        for start in range(0, len(chunk), size):
            if not conn.poll(wait):
                raise TimeoutError("the worker did not answer")
            received.append((chunk[start : start + size], conn.recv_bytes()))
            wait = TIMEOUT_S
        for jobs, raw in received:
            into.add_chunk(jobs, raw)
    except Exception as exc:  # whatever the failure, the share is loaded serially instead
        log.debug("a scan worker failed (%s): its share is scanned serially", exc)
    finally:
        conn.close()
        if process.is_alive():
            process.kill()
        process.join()
