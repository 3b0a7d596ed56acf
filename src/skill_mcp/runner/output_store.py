"""The outputs of recent runs, kept for a bounded time and memory, read back by URI.

A run's files (``skill_mcp.outputs.collect``) are stored under a fresh 128-bit run id and
published as ``skill-run://<run id>/<path>``: a scheme of their own, so an output can never be
mistaken for a skill file, listed by ``resources/list`` or the Skills extension, or executed.

Bounds: a run's outputs live ``RETAIN_S`` seconds; all runs together hold at most
``RETAIN_BYTES``, and the oldest run goes first when a new one would pass that. A run larger
than the whole budget keeps nothing (its files are reported as dropped by the caller).

Scope: where the transport has sessions (HTTP in the handshake era) a run's outputs are read
only in the session that ran it; elsewhere (stdio, whose one client is the session, and the
2026-07-28 era, which has none) the unguessable id is the capability. An unknown id, a path
the run did not write, another session's run and an expired one are refused alike to the
reader (``output-unknown``), except that an id this store expired recently is named as such
(``output-expired``) so a client knows to run the script again.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skill_mcp.errors import SkillMcpError
from skill_mcp.outputs import MAX_DROPPED_LISTED, RETAIN_BYTES, RETAIN_S, Collected, OutputFile
from skill_mcp.reasons import Refusal

SCHEME = "skill-run://"
_EXPIRED_REMEMBERED = 4096  # ids named as expired rather than unknown


@dataclass(frozen=True, slots=True)
class StoredRun:
    run_id: str
    scope: str | None
    created: float
    files: tuple[OutputFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def uri(self, f: OutputFile) -> str:
        return output_uri(self.run_id, f.path)


def output_uri(run_id: str, path: str) -> str:
    return f"{SCHEME}{run_id}/{path}"


def parse_output_uri(uri: str) -> tuple[str, str] | None:
    """``skill-run://<32 hex>/<path>`` -> ``(run id, path)``; None for any other shape."""
    if not uri.startswith(SCHEME):
        return None
    run_id, sep, path = uri[len(SCHEME) :].partition("/")
    if not sep or not path or len(run_id) != 32 or any(c not in "0123456789abcdef" for c in run_id):
        return None
    return run_id, path


@dataclass(slots=True)
class OutputStore:
    retain_s: float = RETAIN_S
    retain_bytes: int = RETAIN_BYTES
    clock: Callable[[], float] = time.monotonic
    _runs: OrderedDict[str, StoredRun] = field(default_factory=OrderedDict)
    _expired: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _bytes: int = 0

    def put(self, collected: Collected, scope: str | None) -> StoredRun | None:
        """Keep a run's files; None when it wrote none, or more than the whole budget."""
        self._expire()
        size = collected.total_bytes
        if not collected.files or size > self.retain_bytes:
            return None
        while self._runs and self._bytes + size > self.retain_bytes:
            self._forget(next(iter(self._runs)))
        run = StoredRun(secrets.token_hex(16), scope, self.clock(), collected.files)
        self._runs[run.run_id] = run
        self._bytes += size
        return run

    def read(self, uri: str, scope: str | None) -> OutputFile:
        """The file behind ``uri`` for a reader in ``scope``; refused with a reason otherwise."""
        self._expire()
        parsed = parse_output_uri(uri)
        if parsed is None:
            raise SkillMcpError(Refusal.OUTPUT_UNKNOWN, f"{uri} is not a run output URI this server issues")
        run_id, path = parsed
        run = self._runs.get(run_id)
        if run is None and run_id in self._expired:
            raise SkillMcpError(
                Refusal.OUTPUT_EXPIRED,
                f"the outputs of run {run_id} were kept {self.retain_s:g} s and are gone; run the script again",
            )
        if run is None or (run.scope is not None and run.scope != scope):
            raise SkillMcpError(Refusal.OUTPUT_UNKNOWN, f"no run output {uri} here (unknown, or another session's)")
        for f in run.files:
            if f.path == path:
                return f
        raise SkillMcpError(Refusal.OUTPUT_UNKNOWN, f"run {run_id} wrote no file {path!r}")

    def peek(self, uri: str) -> OutputFile | None:
        """The file behind ``uri`` whatever the scope: for the call that just stored it."""
        parsed = parse_output_uri(uri)
        run = self._runs.get(parsed[0]) if parsed else None
        return next((f for f in run.files if parsed and f.path == parsed[1]), None) if run else None

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def _expire(self) -> None:
        cutoff = self.clock() - self.retain_s
        while self._runs:
            oldest = next(iter(self._runs.values()))
            if oldest.created > cutoff:
                break
            self._forget(oldest.run_id)

    def _forget(self, run_id: str) -> None:
        run = self._runs.pop(run_id)
        self._bytes -= run.size
        self._expired[run_id] = None
        while len(self._expired) > _EXPIRED_REMEMBERED:
            self._expired.popitem(last=False)


def kept_outputs(store: OutputStore, collected: Collected, scope: str | None) -> dict[str, Any]:
    """Store a run's files; the result's ``outputs`` (and ``outputsDropped``/``notes``) keys.

    Each output is ``{uri, path, size, sha256}``; the surfaces add the MIME type. What the walk
    did not keep is counted with the first entries and their reasons, never dropped silently.
    """
    out: dict[str, Any] = {"outputs": []}
    kept = store.put(collected, scope)
    if kept is not None:
        out["outputs"] = [{"uri": kept.uri(f), "path": f.path, "size": f.size, "sha256": f.sha256} for f in kept.files]
    dropped = [{"path": d.path, "why": d.why} for d in collected.dropped]
    count = collected.dropped_count
    if kept is None and collected.files:
        dropped = [{"path": f.path, "why": "over-retention-budget"} for f in collected.files] + dropped
        count += len(collected.files)
    if count:
        out["outputsDropped"] = {"count": count, "first": dropped[:MAX_DROPPED_LISTED], "complete": collected.complete}
    return out
