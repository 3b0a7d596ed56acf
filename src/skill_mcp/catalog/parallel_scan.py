"""The cold scan of a large catalog over the machine's cores.

With no catalog cache to reuse, every skill is read (``skill.load_skill``), a few hundred
microseconds of CPU each. For ``MIN_SKILLS`` candidates or more, on a machine with two cores
or more, ``preload`` loads the candidates in shares: the calling process loads the first share
itself while worker processes load the others, each returning its results as one pickled
list of ``Loaded`` records (one ``pickle.loads`` in the caller, about a tenth of the load).

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

Job = tuple[str, str, str]  # (real directory, where it was found, the root's real path)


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def single_threaded() -> bool:
    """True when the process runs one thread of any kind (so a fork copies no held lock)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # pragma: no cover - no procfs: assume threads
        return False


def load_share(jobs: list[Job]) -> list[Loaded]:
    return [load_skill(Path(real), Path(found_at), Path(root)) for real, found_at, root in jobs]


def _worker(conn: Connection, jobs: list[Job]) -> None:
    os.dup2(2, 1)  # nothing a worker prints may reach the protocol's stdout
    try:
        conn.send_bytes(pickle.dumps(load_share(jobs), protocol=pickle.HIGHEST_PROTOCOL))
    finally:
        conn.close()


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


def preload(jobs: list[Job], *, workers: int | None = None, min_skills: int = MIN_SKILLS) -> dict[Job, Loaded]:
    """Load ``jobs`` over the cores; the results by job. A job missing from the answer (too few
    jobs or cores, workers not to be had, a worker failed) is for the caller to load."""
    count = min(workers or cores(), len(jobs))
    if count < 2 or len(jobs) < min_skills:
        return {}
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
                process = context.Process(target=_worker, args=(theirs, chunk), daemon=True, name="skill-mcp-scan")
                process.start()
            except BaseException:
                mine.close()
                raise
            finally:
                theirs.close()
            started.append((chunk, process, mine))
    except Exception as exc:  # any failure to start workers: the shares not started load serially
        log.debug("parallel scan unavailable (%s): scanning serially", exc)
    out: dict[Job, Loaded] = dict(zip(shares[0], load_share(shares[0]), strict=True))
    for chunk, process, conn in started:
        out.update(_collect(chunk, process, conn))
    return out


def _collect(chunk: list[Job], process: Any, conn: Connection) -> dict[Job, Loaded]:
    try:
        if not conn.poll(TIMEOUT_S + TIMEOUT_PER_SKILL_S * len(chunk)):
            raise TimeoutError("the worker did not answer")
        results = pickle.loads(conn.recv_bytes())  # noqa: S301 - our own child's answer, over our own pipe
        if not isinstance(results, list) or len(results) != len(chunk):
            raise ValueError("the worker's answer does not match its share")
        return dict(zip(chunk, results, strict=True))
    except Exception as exc:  # whatever the failure, the share is loaded serially instead
        log.debug("a scan worker failed (%s): its share is scanned serially", exc)
        return {}
    finally:
        conn.close()
        if process.is_alive():
            process.kill()
        process.join()
