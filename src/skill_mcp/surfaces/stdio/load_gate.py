"""The SDK's import, paused while an early answer is being computed (``Gate``).

In CPython the thread that imports the SDK holds the GIL about half the time, so an answer the
main thread computes meanwhile (``surfaces.stdio.early``) would take about twice its CPU in
wall time. ``server.serve_stdio_early`` therefore imports the SDK through a gate: the main
thread marks each early answer ``busy()``, and the loading thread waits before it executes its
next module body while it is. (Not in the finder itself: finders run holding the interpreter's
global import lock, and a wait there would stop every thread's imports; the finder only marks
the module's own loader to wait before ``exec_module``, which runs holding that module's lock
alone.) The waits are between module bodies of the SDK stack only
(``SDK_PACKAGES``: the module asked for and every module body the loading thread is executing
belong to it). The early path never imports any of those (``tests/integration/
test_startup_imports.py`` makes them hang), so the loading thread never waits holding a module
lock the answering thread could need: no deadlock. Nothing waits when nothing is asked: the
import then runs at full speed, and readiness is not delayed.

A client that walks a long listing sends its next request a few milliseconds after the last
answer (its own parse of the page). Had the loading thread run in those gaps, each answer would
wait for the GIL behind a module body: at 10,000 skills the 50 pages of a ``skill_list`` walk
took about 9 ms each instead of about 4 (bench/README.md, "Figures behind design choices"). So
after an answer the loading thread also waits ``QUIET_S`` for the next request, for at most
``DEFER_LIMIT_S`` in all, so that a client asking without pause cannot keep the SDK unloaded
(whatever needs it) for longer than that; and once the early phase ends (a request only the
SDK server answers has come), ``hurry`` ends the quiet waits.

``LOAD_ORDER`` is imported first, one top-level name at a time, so that the waits fall inside
the SDK stack and not inside our own modules that import it (``surfaces.app``), where the
loading thread may hold locks of modules the answer imports too. Before it, ``PRELOAD`` (the
modules a first ``skill_list`` or ``skill_search`` needs, which never import the SDK) is
imported without the hook. Stdlib only.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

# What the SDK stands on and the early path never imports: the loading thread may wait inside these.
SDK_PACKAGES = frozenset(
    {
        "mcp",
        "mcp_types",
        "pydantic",
        "pydantic_core",
        "anyio",
        "starlette",
        "sse_starlette",
        "uvicorn",
        "httpx",
        "httpx2",
    }
)
# Imported in this order before the server is composed (a name not installed is skipped).
LOAD_ORDER = ("pydantic", "anyio", "mcp_types", "mcp")
# Our modules the first ``skill_list`` and ``skill_search`` need (the scanner, the search and
# the catalog modules it stands on, the runner that reports each skill's scripts), imported by
# the loading thread before the SDK (``Gate.preload``), in the order a first answer needs them:
# those requests usually come while the SDK is still loading, and the answer would otherwise
# import them itself (the scanner and the runner: about 28 ms at the first page).
PRELOAD = ("skill_mcp.catalog.discover", "skill_mcp.search", "skill_mcp.runner.core")
# With nothing cached the first build reads every skill: the scanner (which a warm build never
# imports) comes right after discovery.
PRELOAD_COLD = (PRELOAD[0], "skill_mcp.catalog.parallel_scan", *PRELOAD[1:])
# After an early answer, how long the loading thread waits for the next request before it runs
# on; and the most those waits may add to the SDK's load in all.
QUIET_S = 0.02
DEFER_LIMIT_S = 1.0


# Loaders made per module by the path finder: one can be told to wait before its module's body.
_PER_MODULE_LOADERS = (
    importlib.machinery.SourceFileLoader,
    importlib.machinery.SourcelessFileLoader,
    importlib.machinery.ExtensionFileLoader,
)


def _in_sdk(name: str) -> bool:
    return name.partition(".")[0] in SDK_PACKAGES


def _only_sdk_bodies(frame: FrameType | None) -> bool:
    """Whether every module body this thread is executing (from ``frame`` outward) is the SDK stack's."""
    while frame is not None:
        if frame.f_code.co_name == "<module>" and not _in_sdk(str(frame.f_globals.get("__name__", ""))):
            return False
        frame = frame.f_back
    return True


class Gate:
    """Whether an early answer is being computed, and the import hook that waits while it is."""

    def __init__(self) -> None:
        self._idle = threading.Event()
        self._idle.set()
        self._loader: int | None = None  # the thread whose SDK imports wait
        self._answered = -float("inf")  # when the last early answer was finished (monotonic)
        self._hurried = threading.Event()  # set once a request waits for the SDK: no quiet gaps then
        self.deferred = 0.0  # seconds the loading thread waited for a quiet gap (at most DEFER_LIMIT_S)
        self.waits = 0  # how many times the loading thread waited (for tests and the bench)

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Mark an early answer being computed (the main thread)."""
        self._idle.clear()
        try:
            yield
        finally:
            self._answered = time.monotonic()
            self._idle.set()

    def hurry(self) -> None:
        """No more quiet gaps (the main thread): the early phase is over, and what comes next
        waits for the SDK. A loading thread waiting for a gap runs on at once."""
        self._hurried.set()

    def _quiet_left(self) -> float:
        """Seconds of the quiet gap after the last answer still to wait (none once hurried, and
        never past ``DEFER_LIMIT_S`` of such waits in all)."""
        if self._hurried.is_set():
            return 0.0
        return min(self._answered + QUIET_S - time.monotonic(), DEFER_LIMIT_S - self.deferred)

    def _asked(self) -> bool:
        """Whether ``_wait`` would wait now (an answer being computed, or a quiet gap not over)."""
        return not self._idle.is_set() or self._quiet_left() > 0

    def _wait(self) -> None:
        """Return once no early answer is being computed and none was finished in the last
        ``QUIET_S`` (that second wait bounded by ``DEFER_LIMIT_S`` over the gate's life)."""
        while True:
            if not self._idle.is_set():
                self.waits += 1
                self._idle.wait()
            left = self._quiet_left()
            if left <= 0:
                return
            start = time.monotonic()
            self._hurried.wait(left)
            self.deferred += time.monotonic() - start

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        """A ``sys.meta_path`` finder in front of the others: in the loading thread, the spec of
        an SDK stack module is the next finders' with its loader told to wait (``_waiting``)
        before the body runs; anything else is left to the next finders (None)."""
        if self._loader != threading.get_ident() or not _in_sdk(name):
            return None
        finders = sys.meta_path[sys.meta_path.index(self) + 1 :]
        for finder in finders:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if isinstance(spec.loader, _PER_MODULE_LOADERS):
                    self._waiting(spec.loader)
                return spec
        return None

    def _waiting(self, loader: Any) -> None:
        """Have ``loader`` wait, when an early answer is being computed, before the body of its
        module runs and while only SDK stack bodies are running in this thread."""
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            del loader.exec_module
            if self._asked() and _only_sdk_bodies(sys._getframe(1)):
                self._wait()
            run(module)

        loader.exec_module = exec_module

    def preload(self, names: Sequence[str] = PRELOAD) -> None:
        """Import ``names`` (``PRELOAD``, or ``PRELOAD_COLD`` when nothing is cached) in this
        thread once no early answer is being computed. Never through the hook (nothing waits
        inside these imports): an early answer that needs one of them meanwhile waits for its
        module lock, which this thread releases without ever waiting on the gate. One that
        fails to import is left to the request that needs it."""
        for name in names:
            self._wait()
            try:
                importlib.import_module(name)
            except ImportError:  # pragma: no cover - a broken install: that request reports it
                continue

    def load_sdk(self) -> None:
        """Import ``LOAD_ORDER`` in this thread, waiting while an early answer is computed."""
        self._loader = threading.get_ident()
        sys.meta_path.insert(0, self)
        try:
            for name in LOAD_ORDER:
                self._wait()
                try:
                    importlib.import_module(name)
                except ImportError:  # pragma: no cover - an SDK without one of them
                    continue
            self._wait()
        finally:
            sys.meta_path.remove(self)
            self._loader = None
