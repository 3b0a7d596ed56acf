"""Serving over this process's stdin and stdout: ``serve_stdio_early`` (the handshake and the
first ``skill_list`` and ``skill_search`` answered while the SDK loads, then the SDK server)
and ``serve_stdio`` (the SDK server from the start)."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from skill_mcp import __version__
from skill_mcp.logs import configure_logging
from skill_mcp.server.catalogs import announce_reloads, catalog_source, prebuild
from skill_mcp.server.compose import Composed, compose_parts, shared_parts, telemetry_for

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.config import Settings
    from skill_mcp.models import Catalog
    from skill_mcp.surfaces.stdio.early import Handover
    from skill_mcp.telemetry import Telemetry

log = logging.getLogger("skill_mcp.server")


def _banner(settings: Settings, catalog: Catalog) -> str:
    roots = ", ".join(str(r) for r in settings.roots)
    problems = len(catalog.problems)
    lines = [
        f"skill-mcp {__version__}: serving {len(catalog.skills)} skill(s) from {roots} ({settings.roots_from})"
        + (f", {problems} problem(s) found (see skill_list or `skill-mcp validate`)" if problems else "")
        + ".",
        "This is an MCP server speaking JSON-RPC on stdin/stdout; it is waiting for an MCP client, not for typing.",
        "Connect a client by having it start this command over stdio, for example:",
        "  Claude Code:     claude mcp add skills -- skill-mcp serve",
        '  Claude Desktop:  "mcpServers": {"skills": {"command": "skill-mcp", "args": ["serve"]}}',
        "Point it at your skills with SKILLS_DIR=/path or --skills-dir /path. Press Ctrl-C to stop.",
    ]
    return "\n".join(lines) + "\n"


INTERRUPTED_EXIT = 130  # Ctrl-C, as a shell reports it


async def _stop_on_signal(scope: Any, received: list[int]) -> None:
    """SIGTERM or SIGINT ends serving like stdin EOF does, so the closers still run; the signal
    is appended to ``received``.

    ``docker stop``, systemd and Kubernetes send SIGTERM; without this Python would die at once
    and a running script would outlive the server.
    """
    import signal

    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("signal received; stopping", extra={"signal": signal.Signals(signum).name})
            received.append(signum)
            scope.cancel()
            return


def serve_stdio_early(settings: Settings, catalog_provider: Callable[[], Catalog] | None = None) -> int:
    """``serve_stdio``, with the handshake answered while the SDK loads (``surfaces.stdio.early``).

    Where the frozen answers are this server's (``early.eligible``), the process hardens
    itself, forks the scan helper (``catalog.scan_helper``) and builds the parts every answer is
    computed from (``Shared``), then a worker thread imports the search modules and the SDK
    (``load_gate.Gate``: waiting while an early answer is computed) and composes the server over
    those parts while this thread answers a plain ``initialize``,
    ``tools/list`` and ``tools/call`` of ``skill_list`` and ``skill_search``; then the server
    serves, reading first what was read so far less the tool calls answered. Otherwise this is
    ``serve_stdio``. Returns an exit code.
    """
    import signal
    import threading

    from skill_mcp.surfaces.stdio import early

    if not early.eligible(settings, stdin_is_terminal=sys.stdin.isatty()):
        import anyio

        return int(anyio.run(serve_stdio, settings, catalog_provider))
    from skill_mcp.catalog import scan_helper
    from skill_mcp.runner.harden import harden_early
    from skill_mcp.surfaces.state import SurfaceState
    from skill_mcp.surfaces.stdio.early_calls import EarlyCalls
    from skill_mcp.surfaces.stdio.load_gate import PRELOAD, PRELOAD_COLD, Gate

    configure_logging(settings.log_level)
    harden_early()  # before any thread exists; DeferredRunner.boot takes this report
    # Forked now, single-threaded and hardened: the helper a cold scan shares its work with. When
    # nothing is cached it imports the scanner at once, on another core, while the handshake runs.
    # On a warm start it checks the cache's directory stamps at once instead (``catalog.verdicts``).
    cold = scan_helper.start_for(settings.cache_dir, list(settings.roots))
    # One provider, runner, search state and memo for the early answers and the SDK server.
    shared = shared_parts(settings, catalog_provider or catalog_source(settings))
    gate = Gate()
    calls = EarlyCalls(SurfaceState(settings, shared.provider, shared.memo, shared.script_states), shared.search, gate)
    state = early.EarlyHandshake(early.root_notes(settings), __version__, calls)
    built: list[Any] = []
    wake_r, wake_w = os.pipe()

    def load() -> None:
        try:
            # What a first answer needs (the scanner too when nothing is cached): that request
            # usually comes while the SDK loads.
            gate.preload(PRELOAD_COLD if cold else PRELOAD)
            gate.load_sdk()  # waits while an early answer is being computed
            built.append(compose_parts(settings, None, None, transport="pipe", shared=shared))
            import anyio  # noqa: F401  - what serving needs, imported here too

            from skill_mcp.surfaces.stdio.transport import run_stdio  # noqa: F401
        except BaseException as err:  # handed to the main thread, which raises it
            built.append(err)
        finally:
            os.write(wake_w, b"!")

    # SIGTERM and SIGINT stop this phase as they stop serving (_stop_on_signal): noted, and
    # written to the wake pipe so the wait ends; a frame being written is finished first.
    received: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: received.append(signum))
        for sig in (signal.SIGTERM, signal.SIGINT)
    }
    os.set_blocking(wake_w, False)
    old_wakeup = signal.set_wakeup_fd(wake_w)
    loader = threading.Thread(target=load, name="skill-mcp-load", daemon=True)
    loader.start()
    try:
        with early.diverted() as (wire_in, wire_out):
            handover = early.answer_early(state, wire_in, wire_out, wake_r)
            gate.hurry()  # what stopped the early answers waits for the SDK: no quiet gaps now
            loader.join()
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(wake_r)
        os.close(wake_w)
    if isinstance(built[0], BaseException):
        raise built[0]
    log.debug(
        "early phase ended",
        extra={"event": "early-handover", "calls": handover.calls, "answered": len(handover.answered)},
    )
    if received:
        log.info("signal received; stopping", extra={"signal": signal.Signals(received[0]).name})
        for close in built[0].closers:
            close()
        log.info("stopped serving over stdio")
        return INTERRUPTED_EXIT if signal.SIGINT in received else 0
    import anyio

    return int(anyio.run(_serve_composed, settings, built[0], None, handover))


async def serve_stdio(settings: Settings, catalog_provider: Callable[[], Catalog] | None = None) -> int:
    """Serve over this process's stdin/stdout until stdin closes; returns an exit code."""
    configure_logging(settings.log_level)
    telemetry = telemetry_for(settings)
    parts = compose_parts(settings, catalog_provider, telemetry, transport="pipe")
    return await _serve_composed(settings, parts, telemetry)


async def _serve_composed(
    settings: Settings, parts: Composed, telemetry: Telemetry | None, early: Handover | None = None
) -> int:
    import anyio

    from skill_mcp.surfaces.stdio.transport import run_stdio

    provider, server = parts.provider, parts.server
    started = time.monotonic()
    if sys.stdin.isatty():
        # A person at a terminal gets the counts now; a client's handshake never waits for the scan.
        sys.stderr.write(_banner(settings, provider()))
        sys.stderr.flush()
    log.info(
        "serving over stdio",
        extra={
            "roots": [str(r) for r in settings.roots],
            "rootsFrom": settings.roots_from,
            "narrowed": settings.narrowed,
        },
    )
    import signal

    received: list[int] = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(announce_reloads, provider, server)
            tg.start_soon(_stop_on_signal, tg.cancel_scope, received)
            prebuild(provider, parts.search, settings)
            await run_stdio(server, early)
            tg.cancel_scope.cancel()
    finally:
        # stdin closed (or we were cancelled): stop whatever still runs, e.g. a script.
        for close in parts.closers:
            try:
                close()
            except Exception:
                log.exception("a shutdown hook failed")
        if telemetry is not None:
            # One stdio connection is one session: it lasts as long as the server serves it.
            telemetry.session_ended(time.monotonic() - started, {"network.transport": "pipe"})
            telemetry.shutdown()
    log.info("stopped serving over stdio")
    # Ctrl-C is an interruption (130); SIGTERM, the orderly stop of a supervisor, and stdin's end are success.
    return INTERRUPTED_EXIT if signal.SIGINT in received else 0
