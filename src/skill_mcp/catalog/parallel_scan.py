"""The cold scan of a large catalog over the machine's cores.

With no catalog cache to reuse, every skill is read (``skill.load_skill``), a few hundred
microseconds of CPU each. ``preload`` shares the scan in one of two ways; every candidate that
is not delivered is loaded by the discovery loop, serially, as it always was.

- **With the scan helper** (``with_helper``, from ``HELPER_FROM`` candidates): one process
  (``scan_helper``: forked at the server's start while it was single-threaded, or forked now by
  a single-threaded caller such as the command-line tools) loads chunks of candidates from the
  end of the list while the discovery loop loads from the front; ``HelperShare`` takes the
  chunks it delivered (pickled ``Loaded`` lists, decoded as the loop reaches them: a
  ``pickle.loads`` costs about a tenth of the load) and claims the rest. The split adapts to
  the speeds, so a busy machine needs no test: the helper runs at a low priority and a starved
  one costs only what it delivered.
- **With worker processes** (``MIN_SKILLS`` candidates or more and more than two cores the
  rest of the machine's work leaves idle, ``free_cores``: by the tasks runnable now; or
  ``workers`` given): the candidates are cut into shares, the calling process loads the first
  while one worker per further core loads the others, each returning its results as pickled
  lists of ``CHUNK`` records (``Preloaded``). Workers are forked only when the process is
  single-threaded (``/proc/self/task`` lists one task), since a fork with other threads alive
  can copy a lock one of them holds; otherwise spawned, a fresh interpreter that imports this
  module, whose start costs the worker tens of milliseconds. A worker writes nothing on
  standard output (its descriptor 1 is pointed at standard error first: the server's stdout
  carries the protocol).

Whatever goes wrong - no process can be made (RLIMIT_NPROC, a seccomp filter), a helper or a
worker dies, times out or answers garbage - what it held is simply missing from the answer, and
the caller loads every missing candidate serially. The catalog is the same either way (tests
compare the two).
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skill_mcp.catalog import scan_helper
from skill_mcp.catalog.loaded import Loaded
from skill_mcp.catalog.scan_helper import HELPER_FROM, cores, single_threaded
from skill_mcp.catalog.skill import load_skill

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
# How long the discovery loop waits for a chunk the helper has started, per skill in it: about
# twice what loading the skill here takes, so a slow helper costs at most that.
WAIT_PER_SKILL_S = 0.0005

Job = tuple[str, str, str]  # (real directory, where it was found, the root's real path)


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

    def close(self) -> None:
        """Nothing to end here (``HelperShare`` ends its helper)."""

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


class HelperShare(Preloaded):
    """The scan shared with a helper (``scan_helper``): the helper loads chunks of ``chunk`` jobs
    from the end of the list (its chunk 0 is the last), the discovery loop loads from the front.
    ``pop`` of a job in chunk ``k``: a chunk the helper has done is decoded; one it has started is
    waited for (at most about what loading it here would take, then it is loaded here); one it
    has not started is claimed (the helper is told, and stops before it) and ``default`` is
    returned, so the loop loads it. Anything the helper fails to deliver is loaded by the loop."""

    __slots__ = (
        "_claimed",
        "_delivered",
        "_done",
        "_ended",
        "_helper",
        "_inbox",
        "_index",
        "_jobs",
        "_outbox",
        "_size",
        "_started",
    )

    def __init__(self, helper: scan_helper.Helper, jobs: list[Job], size: int) -> None:
        super().__init__()
        self._helper = helper
        self._jobs = jobs
        self._size = size
        self._index = {job: at for at, job in enumerate(jobs)}
        self._started: set[int] = set()
        self._done: dict[int, bytes] = {}
        self._claimed: set[int] = set()
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._ended = False
        self._delivered = 0
        try:
            os.set_blocking(helper.commands, False)
            os.set_blocking(helper.answers, False)
            self._send(scan_helper.JOBS, pickle.dumps((size, jobs), protocol=pickle.HIGHEST_PROTOCOL))
        except OSError as exc:
            self._end(f"the job list could not be sent ({exc})")

    def __len__(self) -> int:
        return len(self._index)

    def pop(self, job: Job, default: Loaded | None = None) -> Loaded | None:
        at = self._index.pop(job, None)
        if at is None:
            return default
        if self._outbox:  # the rest of a job list larger than the pipe: the helper waits for it
            self._flush()
        got = self._ready.pop(job, None)
        if got is not None:
            return got
        k = (len(self._jobs) - 1 - at) // self._size
        if k in self._claimed:
            return default
        if not self._ended:
            self._drain()
            if k in self._started and k not in self._done and not self._ended:
                self._wait(k)
        raw = self._done.pop(k, None)
        if raw is None or not self._decode_chunk(k, raw):
            self._claim(k)
            return default
        return self._ready.pop(job, default)

    def close(self) -> None:
        log.debug("the scan helper loaded %d of %d skills", self._delivered, len(self._jobs))
        self._done.clear()
        self._helper.close()

    def _chunk_jobs(self, k: int) -> list[Job]:
        end = len(self._jobs) - k * self._size
        return self._jobs[max(0, end - self._size) : end]

    def _decode_chunk(self, k: int, raw: bytes) -> bool:
        jobs = self._chunk_jobs(k)
        try:
            results = pickle.loads(raw)  # noqa: S301 - our own helper's answer, over our own pipe
            if not isinstance(results, list) or len(results) != len(jobs):
                raise ValueError("a chunk does not match its jobs")
            if not all(type(result) is Loaded for result in results):
                raise ValueError("a chunk holds something other than load results")
        except Exception as exc:  # whatever the failure, this chunk is loaded here
            log.debug("a scan helper's chunk failed (%s): it is scanned here", exc)
            return False
        self._ready.update(zip(jobs, results, strict=True))
        self._delivered += len(jobs)
        return True

    def _claim(self, k: int) -> None:
        """Load chunk ``k`` here; the helper, told, starts no chunk at or past it."""
        self._claimed.add(k)
        if not self._ended:
            self._send(scan_helper.CLAIM, k.to_bytes(4, "big"))

    def _wait(self, k: int) -> None:
        """Wait for the started chunk ``k`` about as long as loading it here would take."""
        deadline = time.monotonic() + WAIT_PER_SKILL_S * self._size
        poll = select.poll()
        poll.register(self._helper.answers, select.POLLIN)
        while k not in self._done and not self._ended:
            left = deadline - time.monotonic()
            if left <= 0:
                log.debug("the scan helper is slow: its chunk is scanned here")
                return
            poll.poll(max(1, int(left * 1000)))
            self._drain()

    def _send(self, kind: bytes, payload: bytes) -> None:
        self._outbox += kind + len(payload).to_bytes(4, "big") + payload
        self._flush()

    def _flush(self) -> None:
        while self._outbox and not self._ended:
            try:
                sent = os.write(self._helper.commands, self._outbox)
            except BlockingIOError:
                return
            except OSError as exc:
                self._end(f"the helper is gone ({exc})")
                return
            del self._outbox[:sent]

    def _drain(self) -> None:
        inbox = self._inbox
        while not self._ended:
            try:
                got = os.read(self._helper.answers, 1 << 20)
            except BlockingIOError:
                break
            except OSError as exc:
                self._end(f"its answers failed ({exc})")
                break
            if not got:
                self._ended = True  # the helper stopped or died: what it sent is kept
                break
            inbox += got
        at = 0
        while len(inbox) - at >= 9:
            kind = inbox[at : at + 1]
            k = int.from_bytes(inbox[at + 1 : at + 5], "big")
            size = int.from_bytes(inbox[at + 5 : at + 9], "big")
            if kind == scan_helper.STARTED:
                self._started.add(k)
            elif kind == scan_helper.DONE:
                if len(inbox) - at - 9 < size:
                    break
                if k not in self._claimed:
                    self._done[k] = bytes(inbox[at + 9 : at + 9 + size])
            else:
                self._end("it answered garbage")
                break
            at += 9 + (size if kind == scan_helper.DONE else 0)
        del inbox[:at]

    def _end(self, why: str) -> None:
        log.debug("the scan helper failed (%s): the rest is scanned here", why)
        self._ended = True
        self._started.clear()
        self._outbox.clear()


def preload(
    jobs: list[Job], *, workers: int | None = None, min_skills: int = MIN_SKILLS, helper_from: int = HELPER_FROM
) -> Preloaded:
    """Load ``jobs`` over the cores; the results by job. A job missing from the answer (too few
    jobs, no idle core by ``free_cores`` unless ``workers`` says how many, workers not to be
    had, a worker failed) is for the caller to load. The caller ``close``s the answer.

    From ``helper_from`` jobs, unless ``workers`` is given or more than two cores are idle for
    a scan of ``min_skills`` or more, the scan is shared with one helper (``with_helper``)."""
    if workers is None:
        shared = with_helper(jobs, helper_from, min_skills)
        if shared is not None:
            return shared
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


def with_helper(jobs: list[Job], helper_from: int = HELPER_FROM, min_skills: int = MIN_SKILLS) -> HelperShare | None:
    """The scan shared with the helper forked at start-up (``scan_helper.start``), or with one
    forked now when this process is single-threaded; None (and the waiting helper dismissed)
    for fewer than ``helper_from`` jobs, or where more than two idle cores make worker
    processes worth their start (``min_skills`` jobs or more), or with no helper to be had.
    The helper's share adapts to what it manages (``HelperShare``), so a busy machine needs no
    test here: a starved helper costs only what it delivered."""
    if len(jobs) < helper_from or (len(jobs) >= min_skills and free_cores(cores()) > 2):
        scan_helper.dismiss()
        return None
    helper = scan_helper.take()
    if helper is None and scan_helper.start(primed=True):
        helper = scan_helper.take()
    if helper is None:
        return None
    log.debug("scanning with the scan helper", extra={"skills": len(jobs)})
    return HelperShare(helper, jobs, scan_helper.CHUNK)


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
