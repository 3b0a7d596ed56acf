"""What a server is made of, built the same way for every transport.

``shared_parts`` builds what every answer is computed from (the catalog provider, the runner
and its script states, the search state, the digest memo); ``plugins`` turns those into the
tools the runner and the search add; ``build_server`` hands everything to
``surfaces.app.assemble``; ``compose_parts`` does all three for a transport, with telemetry when
it is configured (``telemetry_for``). Nothing here imports ``mcp`` itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from skill_mcp.server.catalogs import catalog_source, static_catalog

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog.digest_memo import DigestMemo
    from skill_mcp.config import Settings
    from skill_mcp.models import Catalog
    from skill_mcp.runner.audit import AuditSink
    from skill_mcp.runner.deferred import DeferredRunner
    from skill_mcp.runner.types import OutputTap
    from skill_mcp.surfaces.app import SkillServer
    from skill_mcp.surfaces.registry import ScriptStates, ToolSpec
    from skill_mcp.surfaces.search_tool import SearchState
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


@dataclass(frozen=True, slots=True)
class Composed:
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


def compose_parts(
    settings: Settings,
    catalog_provider: Callable[[], Catalog] | None,
    telemetry: Telemetry | None = None,
    *,
    transport: str = "pipe",
    shared: Shared | None = None,
) -> Composed:
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
    return Composed(provider, server, tuple(extra.closers), shared.search)


def _read_tool_names() -> list[str]:
    from skill_mcp.surfaces.read_tools import read_tools

    return [spec.name for spec in read_tools()]
