"""The body phase of a two-phase build, in a worker process instead of the server's thread.

``build_elsewhere`` sends the build order to ``search.worker`` (spawned: a fresh interpreter,
never a fork of the threaded server), waits for it without holding the GIL, then opens what it
wrote exactly as a warm start opens an index an earlier start persisted (``stored_index``:
the key of the catalog served, recomputed here from its own stamps, and every checksum). Only
an index that passes is returned; None means "build it here" (no process could be started,
the worker failed or was killed, or what it wrote does not verify). With no cache directory
the worker writes into a private temporary directory, removed once the index is open.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from skill_mcp.catalog.files import SKILL_MD
from skill_mcp.models import Catalog, Skill, SkillFile
from skill_mcp.search.index import SearchIndex
from skill_mcp.search.source import BuildAbandoned, in_order, items, stored_index
from skill_mcp.search.store import index_file

log = logging.getLogger("skill_mcp.search")

POLL_SECONDS = 0.2  # how often a waiting build checks that its catalog is still served


def worker_argv() -> list[str]:
    return [sys.executable, "-m", "skill_mcp.search.worker", str(os.getpid())]


def worker_env() -> dict[str, str]:
    """The server's environment, with the directory this ``skill_mcp`` was imported from first
    on ``PYTHONPATH``: the worker runs the server's code, however the server found it."""
    here = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": here if not rest else here + os.pathsep + rest}


# A record as the worker needs it to read a body: name, directory, where it was found, root,
# description, SKILL.md's file row (rel, size, mtime_ns, ino) or None, body offset, path.
# Plain values: they pickle ten times faster than the records themselves.
Slim = tuple[str, str, str, str, str, tuple[str, int, int, int] | None, int, str]


def slim(skill: Skill) -> Slim:
    md = skill.file(SKILL_MD)
    row = None if md is None else (md.rel, md.size, md.mtime_ns, md.ino)
    return (
        skill.name,
        str(skill.directory),
        skill.found_at,
        str(skill.root),
        skill.description,
        row,
        skill.body_offset,
        skill.path,
    )


def record(wire: Slim) -> Skill:
    """The record ``slim`` was made from, less what reading its body does not need (the
    frontmatter arrives as the fields taken from it; of the files, SKILL.md alone)."""
    name, directory, found_at, root, description, row, body_offset, path = wire
    return Skill(
        name=name,
        directory=Path(directory),
        found_at=found_at,
        root=Path(root),
        frontmatter={},
        description=description,
        files=() if row is None else (SkillFile(*row),),
        body_offset=body_offset,
        path=path,
    )


def build_elsewhere(
    catalog: Catalog,
    cache_dir: Path | None,
    keep_going: Callable[[], bool],
    *,
    argv: Sequence[str] | None = None,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> SearchIndex | None:
    """The whole index of ``catalog``, built by a worker process and verified here, or None.

    Raises ``BuildAbandoned`` (the worker killed) once ``keep_going()`` is false. ``started``
    is told the process (tests kill it)."""
    if not catalog.roots:
        return None
    private = cache_dir is None
    try:
        where = Path(tempfile.mkdtemp(prefix="skill-mcp-search-")) if cache_dir is None else cache_dir
    except OSError:
        return None
    try:
        wire = [(f, k, slim(s)) for f, k, s in items(in_order(catalog))]
        order = {"path": str(index_file(where, catalog.roots)), "private": private, "items": wire}
        rc = _run(pickle.dumps(order, protocol=pickle.HIGHEST_PROTOCOL), keep_going, argv, started)
        if rc != 0:
            log.info("search index worker did not write an index; building here", extra={"status": rc})
            return None
        # The key of the catalog served, from its own stamps (the key fields are the records',
        # made once above: a record never changes), checked as a warm start checks it.
        index = stored_index(catalog, where, [k for _, k, _ in wire])
        if index is None:
            log.warning("search index from the worker did not verify; building here")
        return index
    finally:
        if private:  # the open index keeps its descriptor
            from skill_mcp.trees import NotRemoved, remove_tree

            try:
                remove_tree(str(where))  # iterative, never follows a link: a tree of any depth goes
            except (NotRemoved, OSError) as exc:
                log.warning("search index worker's scratch directory not removed", extra={"why": str(exc)[:200]})


def _run(
    payload: bytes,
    keep_going: Callable[[], bool],
    argv: Sequence[str] | None,
    started: Callable[[subprocess.Popen[bytes]], None] | None,
) -> int | None:
    """Start the worker, hand it ``payload``, wait: its exit status, None when none started."""
    try:
        proc = subprocess.Popen(
            list(argv or worker_argv()),
            stdin=subprocess.PIPE,
            stdout=2,  # never the protocol's stdout: what it prints goes to stderr
            close_fds=True,
            env=worker_env(),
        )
    except (OSError, ValueError) as exc:  # no process to be had (RLIMIT_NPROC, seccomp, ...)
        log.info("search index worker not started; building here", extra={"why": str(exc)[:200]})
        return None
    assert proc.stdin is not None
    pidfd = _pidfd(proc.pid)
    try:
        if started is not None:
            started(proc)
        with contextlib.suppress(BrokenPipeError):  # it died early: its status says so
            proc.stdin.write(len(payload).to_bytes(8, "big") + payload)
            proc.stdin.flush()
        while True:
            if not keep_going():
                raise BuildAbandoned
            status = _wait(proc, pidfd)
            if status is not None:
                return status
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):
            proc.stdin.close()
        if pidfd is not None:
            os.close(pidfd)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+: poll instead
        return None


def _wait(proc: subprocess.Popen[bytes], pidfd: int | None) -> int | None:
    """Its exit status, or None after ``POLL_SECONDS``: asleep in ``select`` on a pidfd (no GIL,
    no wake-up), where ``Popen.wait(timeout)`` would wake up every few milliseconds."""
    if pidfd is None:
        try:
            return proc.wait(POLL_SECONDS)
        except subprocess.TimeoutExpired:
            return None
    select.select([pidfd], [], [], POLL_SECONDS)
    return proc.poll()
