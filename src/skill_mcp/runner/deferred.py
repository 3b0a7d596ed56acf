"""The runner as a server holds it: the process hardened at once, the fence built on first need.

``DeferredRunner.boot`` runs ``harden_process`` (the environ wipe and non-dumpable) before it
returns, so both are in force before the server reads its first request and before any thread
or child exists; a standalone server whose wipe failed writes its warning line then too.
Everything else ``Runner.create`` decides once - the interpreter set on the fixed path, the
identity a root server drops scripts to, the local spawner, the token book - is decided the
first time something needs it: the first ``skill_run``, or the first answer that reports
script states (``skill_list``, ``skill_load``). It is decided once and kept, so every answer
and every run of one server sees the same facts, as if they had been decided at boot; only
the handshake no longer waits for them, nor for the imports behind them (a client's first
answer is the cost start-up is judged by).

In the appliance (``SKILL_MCP_BROKER_FD``) the runner is built at boot: the broker is asked
whether its fence is in force before anything is served.

This module imports only the hardening; ``runner.core`` and what it pulls in are imported by
the first build.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from skill_mcp.runner.audit import AuditSink, stderr_sink
from skill_mcp.runner.harden import harden_process, take_early, unscrubbed_warning

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.config import Settings
    from skill_mcp.models import Catalog, Problem, Skill
    from skill_mcp.runner.core import FenceStates, Runner
    from skill_mcp.runner.output_store import OutputStore
    from skill_mcp.runner.types import OutputTap


class DeferredRunner:
    """One server's ``Runner``, built by ``get`` on first need (thread-safe, once)."""

    def __init__(self, build: Callable[[], Runner]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._runner: Runner | None = None

    @classmethod
    def boot(
        cls, settings: Settings, *, audit: AuditSink = stderr_sink, on_output: OutputTap | None = None
    ) -> DeferredRunner:
        """The one way a server builds its runner: harden this process now, once, and report a
        failed wipe (standalone) now, once; build the runner from ``settings`` when first needed,
        or at once in the appliance, where the broker is asked before anything is served."""
        early = take_early()  # serve_stdio_early hardens before it starts its loader thread
        harden = early if early is not None else harden_process()
        warning = unscrubbed_warning(harden)
        if warning is not None and not settings.hosted:
            audit(warning)

        def build() -> Runner:
            from skill_mcp.runner.core import Runner

            return Runner.create(settings, harden=harden, audit=audit, on_output=on_output)

        runner = cls(build)
        if settings.broker_fd is not None:
            runner.get()
        return runner

    @property
    def built(self) -> bool:
        return self._runner is not None

    def get(self) -> Runner:
        runner = self._runner
        if runner is None:
            with self._lock:
                if self._runner is None:
                    self._runner = self._build()
                runner = self._runner
        return runner

    def outputs(self) -> OutputStore | None:
        """The runner's store of run outputs; None while no runner exists (no script has run)."""
        return self._runner.outputs if self._runner is not None else None

    def stop_running(self) -> None:
        """Server shutdown: end the script in progress; a runner never built has none."""
        if self._runner is not None:
            self._runner.stop_running()

    def states(self, catalog_provider: Callable[[], Catalog]) -> DeferredStates:
        """The ``surfaces.registry.ScriptStates`` view, building the runner on its first answer."""
        return DeferredStates(self, catalog_provider)


class DeferredStates:
    """``Runner.states`` for a runner not built yet: every method builds it (once) and asks it."""

    def __init__(self, runner: DeferredRunner, catalog_provider: Callable[[], Catalog]) -> None:
        self._runner = runner
        self._provider = catalog_provider
        self._lock = threading.Lock()
        self._states: FenceStates | None = None

    def _fence(self) -> FenceStates:
        states = self._states
        if states is None:
            with self._lock:
                if self._states is None:
                    self._states = self._runner.get().states(self._provider)
                states = self._states
        return states

    def grant(self) -> Mapping[str, Any]:
        return self._fence().grant()

    def scripts(self, skill: Skill) -> Sequence[Mapping[str, Any]]:
        return self._fence().scripts(skill)

    def skill_extras(self, skill: Skill) -> Mapping[str, Any]:
        return self._fence().skill_extras(skill)

    def problems(self) -> Sequence[Problem]:
        return self._fence().problems()
