"""The composition root: ``build_server`` (any transport), ``serve_stdio`` and ``serve_http``.

This module wires the layers together and is the only place that does (docs/architecture.md
draws it above ``surfaces``): it builds the catalog provider from the settings, the runner and
the search state with their tools (``plugins``), hands them to ``surfaces.app.assemble``, and
gives the result to a transport in ``surfaces`` (stdio, or Streamable HTTP with the runner's
closers as its stop hooks). It does not import ``mcp`` itself.

    python -m skill_mcp.server [--skills-dir DIR ...]   # same as `skill-mcp serve`
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from skill_mcp import __version__
from skill_mcp.catalog.lazy import LazyCatalog
from skill_mcp.config import Settings, load_settings
from skill_mcp.logs import configure_logging

if TYPE_CHECKING:  # pragma: no cover - typing only
    import threading

    from skill_mcp.catalog.digest_memo import DigestMemo
    from skill_mcp.models import Catalog
    from skill_mcp.runner.audit import AuditSink
    from skill_mcp.runner.deferred import DeferredRunner
    from skill_mcp.runner.types import OutputTap
    from skill_mcp.surfaces.app import SkillServer
    from skill_mcp.surfaces.registry import ScriptStates, ToolSpec
    from skill_mcp.surfaces.search_tool import SearchState
    from skill_mcp.surfaces.stdio.early import Handover
    from skill_mcp.telemetry import Telemetry

log = logging.getLogger("skill_mcp.server")


@dataclass(frozen=True, slots=True)
class Plugins:
    """What the runner and search add to a server: tools, the script-state view, stop hooks."""

    script_states: ScriptStates
    tools: tuple[ToolSpec, ...] = ()
    closers: tuple[Callable[[], Any], ...] = field(default=(), repr=False)
    # The store of recent runs' outputs once a runner exists (skill-run:// resources).
    run_outputs: Callable[[], Any] = field(default=lambda: None, repr=False)


@dataclass(frozen=True, slots=True)
class RunHooks:
    """What an in-process caller (``skill-mcp call``) gives the runner: where the per-run audit
    line goes (``None``: stderr, as a server writes it) and a tap on a running script's output."""

    audit: AuditSink | None = None
    on_output: OutputTap | None = None


@dataclass(frozen=True, slots=True)
class Shared:
    """What a server's answers are computed from, each built once: the catalog provider, the
    runner and the script states it reports, the search state, the digest memo.

    ``serve_stdio_early`` builds these before its loading thread starts: the answers given
    before the SDK is imported (``surfaces.stdio.early_calls``) and the SDK server composed
    afterwards hold the same instances, so nothing an early answer scanned, decided or indexed
    is built a second time. None of them imports the SDK."""

    provider: Callable[[], Catalog]
    runner: DeferredRunner
    script_states: ScriptStates
    search: SearchState
    memo: DigestMemo


def shared_parts(
    settings: Settings,
    catalog_provider: Callable[[], Catalog],
    telemetry: Telemetry | None = None,
    hooks: RunHooks | None = None,
) -> Shared:
    """The runner (booted: the process is hardened here), the search state and the memo over
    ``catalog_provider``."""
    # The boot hardening (environ wipe, non-dumpable) happens here, before anything is served
    # and before any thread or child could copy the environment block; the fence itself
    # (interpreters, script user, spawner) is built on first need.
    from skill_mcp.catalog.digest_memo import DigestMemo
    from skill_mcp.runner.deferred import DeferredRunner
    from skill_mcp.surfaces.search_tool import SearchState

    hooks = hooks or RunHooks()
    if hooks.audit is None:
        runner = DeferredRunner.boot(settings, on_output=hooks.on_output)
    else:
        runner = DeferredRunner.boot(settings, audit=hooks.audit, on_output=hooks.on_output)
    search = SearchState(settings.cache_dir, on_build=telemetry.search_built if telemetry is not None else None)
    return Shared(catalog_provider, runner, runner.states(catalog_provider), search, DigestMemo())


def plugins(
    settings: Settings,
    catalog_provider: Callable[[], Catalog],
    telemetry: Telemetry | None = None,
    hooks: RunHooks | None = None,
    *,
    shared: Shared | None = None,
) -> Plugins:
    """Collect extra tools (``skill_run``, ``skill_search``) for this server, over ``shared``
    (built here from the other arguments when not given).

    Engineers owning those tools add their factory call here; nothing else in ``surfaces``
    changes when a tool is added.
    """
    from skill_mcp.surfaces.run_tool import deferred_run_tool_spec
    from skill_mcp.surfaces.search_tool import search_tool_spec

    if shared is None:
        shared = shared_parts(settings, catalog_provider, telemetry, hooks)
    runner, search = shared.runner, shared.search
    tools = (deferred_run_tool_spec(runner.get, telemetry), search_tool_spec(search), *_compat_tools(settings, search))
    return Plugins(
        tools=tools,
        script_states=shared.script_states,
        closers=(runner.stop_running,),
        run_outputs=runner.outputs,
    )


def _compat_tools(settings: Settings, search: Any) -> tuple[ToolSpec, ...]:
    """``SKILL_MCP_COMPAT=skillmcp``: the ``skillmcp`` profile's three tools (``list_packs``, ``search_skills``, ``get_skill``) beside ours (docs/configuration.md)."""
    if settings.compat is None:
        return ()
    from skill_mcp.surfaces.seed_tools import PROFILE, seed_tool_specs

    if settings.compat != PROFILE:
        log.warning(
            "SKILL_MCP_COMPAT names no known profile; no compatibility tools are offered",
            extra={"event": "compat-unknown", "value": settings.compat, "known": [PROFILE]},
        )
        return ()
    return seed_tool_specs(search)


def static_catalog(settings: Settings) -> Callable[[], Catalog]:
    """The catalog, built once: by ``prebuild`` as soon as the server serves, or by a first
    request that needs it sooner. The handshake reads no directory.

    Nothing in ``initialize`` or ``tools/list`` depends on the skills found, so the scan
    (O(N) in skills) is kept off the handshake; ``LazyCatalog`` logs its size (debug) once built.
    """
    return LazyCatalog(settings)


def catalog_source(settings: Settings) -> Callable[[], Catalog]:
    """The catalog provider a transport serves from.

    With ``settings.watch`` a reloading provider belongs here (``serve --watch``): a zero-arg
    callable returning the current catalog that also has ``async def run(on_change)``, a
    watcher loop that swaps the catalog and then awaits ``on_change()``. ``announce_reloads``
    runs that loop beside the server and ``on_change`` tells connected clients.
    """
    if settings.watch:
        from skill_mcp.catalog.watch import LiveCatalog

        return LiveCatalog(settings)
    return static_catalog(settings)


async def announce_reloads(provider: Callable[[], Catalog], server: Any) -> None:
    """Run ``provider.run(on_change)`` when the provider reloads and the server can announce.

    Returns at once for a static catalog; transports start it in their task group and cancel
    it when they stop.
    """
    run = getattr(provider, "run", None)
    announcer = getattr(server, "announcer", None)
    if not callable(run) or announcer is None:
        return
    await run(announcer.announce)


@overload
def build_server(
    settings: Settings, catalog_provider: Callable[[], Catalog] | None = None, *, hooks: RunHooks | None = None
) -> SkillServer: ...


@overload
def build_server(
    settings: Settings,
    catalog_provider: Callable[[], Catalog] | None = None,
    *,
    tools: Sequence[ToolSpec],
    script_states: ScriptStates,
    run_outputs: Callable[[], Any] | None = None,
    memo: DigestMemo | None = None,
) -> SkillServer: ...


def build_server(
    settings: Settings,
    catalog_provider: Callable[[], Catalog] | None = None,
    *,
    tools: Sequence[ToolSpec] | None = None,
    script_states: ScriptStates | None = None,
    hooks: RunHooks | None = None,
    run_outputs: Callable[[], Any] | None = None,
    memo: DigestMemo | None = None,
) -> SkillServer:
    """Return a ready server for any transport.

    ``catalog_provider`` is called per request (a reloading catalog swaps what it returns);
    by default the catalog is built once from ``settings``. Without ``tools`` the server gets
    what ``plugins`` collects (the runner's ``skill_run``, with ``hooks``, and its script states).
    With ``tools``, ``script_states`` must come too: what ``skill_list`` says of scripts and
    grants is the word of whatever runs them (``runner.states``; ``DeclaredScripts`` for a
    server that runs none), never a default chosen here. A half call raises ``TypeError``.
    """
    from skill_mcp.surfaces.app import assemble

    provider = catalog_provider or static_catalog(settings)
    if tools is not None and script_states is not None and hooks is None:
        return assemble(
            settings, provider, tools=tuple(tools), script_states=script_states, run_outputs=run_outputs, memo=memo
        )
    if tools is not None or script_states is not None or run_outputs is not None or memo is not None:
        raise TypeError("build_server: give tools and script_states together (and hooks only without them)")
    extra = plugins(settings, provider, hooks=hooks)
    return assemble(
        settings, provider, tools=extra.tools, script_states=extra.script_states, run_outputs=extra.run_outputs
    )


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


@dataclass(frozen=True, slots=True)
class _Composed:
    """One server and its parts, built the same way for every transport."""

    provider: Callable[[], Catalog]
    server: SkillServer
    closers: tuple[Callable[[], Any], ...]
    search: SearchState | None = None  # what ``prebuild`` opens beside the catalog


def telemetry_for(settings: Settings, *, scrape: bool = False) -> Telemetry | None:
    """The process's ``Telemetry`` when any export is configured, else None (nothing imported).

    Without the ``skillmcp[otel]`` extra installed, a configured export is reported once and
    the server runs without it.
    """
    from skill_mcp.telemetry_config import wanted

    if not wanted(settings.environ, scrape=scrape):
        return None
    try:
        from skill_mcp.telemetry import Telemetry
    except ImportError as err:  # pragma: no cover - the extra is part of the dev install
        log.warning(
            "telemetry is configured but the OpenTelemetry SDK is not installed "
            "(pip install 'skillmcp[otel]'); serving without it",
            extra={"event": "otel-unavailable", "detail": str(err)},
        )
        return None
    try:
        return Telemetry.create(settings.environ, prometheus=scrape)
    except ImportError as err:
        log.warning(
            "telemetry is configured but an exporter is not installed (pip install 'skillmcp[otel]'); "
            "serving without it",
            extra={"event": "otel-unavailable", "detail": str(err)},
        )
        return None


def say_root_notes(settings: Settings) -> None:
    """Log, once at start, each root that is not a directory or serves nothing (the same notes
    the server's ``instructions`` carry): a typo in a client's configuration must not look like
    a server that works but has no skills."""
    from skill_mcp.catalog.roots import probe_roots

    for note in probe_roots(settings):
        log.warning(f"{note.path}: {note.detail}", extra={"event": str(note.reason), "path": note.path})


def _compose(
    settings: Settings,
    catalog_provider: Callable[[], Catalog] | None,
    telemetry: Telemetry | None = None,
    *,
    transport: str = "pipe",
    shared: Shared | None = None,
) -> _Composed:
    say_root_notes(settings)
    if shared is None:
        shared = shared_parts(settings, catalog_provider or catalog_source(settings), telemetry)
    provider = shared.provider
    extra = plugins(settings, provider, telemetry, shared=shared)
    server = build_server(
        settings,
        provider,
        tools=extra.tools,
        script_states=extra.script_states,
        run_outputs=extra.run_outputs,
        memo=shared.memo,
    )
    from skill_mcp.surfaces import observe

    if telemetry is None:
        observe.remove_sdk_spans(server)
    else:
        observe.install(server, telemetry, [t.name for t in extra.tools] + _read_tool_names(), transport=transport)
        hook = getattr(provider, "observe_builds", None)
        if callable(hook):
            hook(telemetry.catalog_built)
    return _Composed(provider, server, tuple(extra.closers), shared.search)


def prebuild(
    provider: Callable[[], Catalog], search: SearchState | None = None, settings: Settings | None = None
) -> threading.Thread | None:
    """Build the catalog, then open or start its search index, in a background thread: called
    once the server serves, so that a host's first catalog request, which usually comes well
    after the handshake, finds both ready instead of paying for them. The handshake still reads
    no directory. A request that comes first builds them itself and the thread then finds them
    built (``LazyCatalog`` and ``SearchState`` each build once, under a lock). A provider that
    is built already or builds on its own (``--watch``) is left alone; so is a failure, which
    the first request meets again and reports. With ``settings``, the scan helper is forked
    first, unless one waits already (``serve_stdio_early`` forks it before the handshake): a
    build in a thread cannot fork one, and would scan alone. Returns the thread, or None when
    none started."""
    if getattr(provider, "built", True):
        return None
    if settings is not None:
        from skill_mcp.catalog import scan_helper

        scan_helper.start_for(settings.cache_dir, list(settings.roots))

    def run() -> None:
        try:
            catalog = provider()
            if search is not None:
                search.index_for(catalog)
        except Exception as exc:  # the first request that needs the catalog builds it again, and says why
            log.info("catalog not built ahead of the first request", extra={"why": str(exc)[:200]})

    import threading

    thread = threading.Thread(target=run, name="skill-mcp-prebuild", daemon=True)
    thread.start()
    return thread


def _read_tool_names() -> list[str]:
    from skill_mcp.surfaces.read_tools import read_tools

    return [spec.name for spec in read_tools()]


def serve_http(
    settings: Settings,
    host: str,
    port: int,
    token: str | None,
    no_auth: bool,
    *,
    allowed_hosts: Iterable[str] = (),
    catalog_provider: Callable[[], Catalog] | None = None,
    server_factory: Callable[[Settings], Any] | None = None,
    metrics: str | None = None,
    **bounds: float,
) -> int:
    """Serve over Streamable HTTP (``surfaces.http.transport``) until SIGTERM/SIGINT; returns an exit code.

    The server is the one stdio serves; the runner's closers become the drain's stop hooks and
    the catalog watcher runs beside it. ``server_factory(settings)`` serves another
    ``mcp.server.lowlevel.Server`` with neither. ``bounds`` are ``drain_seconds`` /
    ``cancel_seconds``. Raises ``SkillMcpError`` (``http-*``) before binding on unsafe exposure.
    """
    from skill_mcp.surfaces.http.transport import Served, run_http

    configure_logging(settings.log_level)  # before the composition, which may log the roots' notes
    metrics = metrics if metrics is not None else settings.metrics
    telemetry = telemetry_for(settings, scrape=metrics is not None)
    if metrics is not None and telemetry is None:
        from skill_mcp.errors import SkillMcpError
        from skill_mcp.reasons import Refusal

        raise SkillMcpError(
            Refusal.HTTP_METRICS_UNAVAILABLE,
            "--metrics needs the OpenTelemetry SDK and its Prometheus exporter: pip install 'skillmcp[otel]'",
        )
    if server_factory is not None:
        served = Served(server_factory(settings), telemetry=telemetry)
    else:
        parts = _compose(settings, catalog_provider, telemetry, transport="tcp")

        async def watch() -> None:
            prebuild(parts.provider, parts.search, settings)
            await announce_reloads(parts.provider, parts.server)

        served = Served(parts.server, parts.closers, (watch,), telemetry=telemetry)
    try:
        return run_http(
            settings, host, port, token, no_auth, served=served, allowed_hosts=allowed_hosts, metrics=metrics, **bounds
        )
    finally:
        if telemetry is not None:
            telemetry.shutdown()


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
            built.append(_compose(settings, None, None, transport="pipe", shared=shared))
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
    parts = _compose(settings, catalog_provider, telemetry, transport="pipe")
    return await _serve_composed(settings, parts, telemetry)


async def _serve_composed(
    settings: Settings, parts: _Composed, telemetry: Telemetry | None, early: Handover | None = None
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


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m skill_mcp.server", description="serve skills over stdio")
    parser.add_argument("--skills-dir", dest="skills_dirs", action="append", default=[], metavar="DIR")
    parser.add_argument("--watch", action="store_true", help="rebuild the catalog when files change")
    args = parser.parse_args(argv)
    settings = load_settings(args.skills_dirs, watch=args.watch)
    try:
        return serve_stdio_early(settings)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
