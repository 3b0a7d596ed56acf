"""Assemble one low-level SDK ``Server`` from the catalog, the tool specs and the settings.

Narrowing (``MCP_ENABLED_TOOLS``): only the named tools are registered; ``prompts/list`` and
``resources/list`` answer with empty lists, ``prompts/get`` and ``resources/read`` with
``-32602``, the ``skills/*`` methods are not registered at all, and neither handshake
(``initialize`` nor ``server/discover``) advertises prompts, resources or the extension.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from skill_mcp import __version__
from skill_mcp.catalog.digest_memo import DigestMemo
from skill_mcp.config import Settings
from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces import prompts, resources, run_outputs, skills_ext
from skill_mcp.surfaces.client_logs import ClientLogForwarder
from skill_mcp.surfaces.errors import invalid_params, unknown_uri
from skill_mcp.surfaces.handshake import initialize_detail_middleware
from skill_mcp.surfaces.live import ChangeAnnouncer
from skill_mcp.surfaces.read_tools import read_tools
from skill_mcp.surfaces.registry import ScriptStates, ToolSpec
from skill_mcp.surfaces.state import INLINE_READ_BYTES, SurfaceState, files_checked, hold_answer_bytes
from skill_mcp.surfaces.stdio.early import root_notes
from skill_mcp.surfaces.tools import ToolTable

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Catalog

log = logging.getLogger("skill_mcp.server")

SERVER_NAME = "skill-mcp"
LIST_TTL_MS = 60_000

INSTRUCTIONS = (
    "This server serves Agent Skills: folders of instructions, reference files and scripts for "
    "specific tasks. Catalogs can be large, so do not read everything up front. First call "
    "{discover} to see skill names and descriptions (it is paginated: pass nextCursor back as cursor). "
    "When a skill's description matches the task, load that one skill with skill_load, then read only "
    "the files its instructions point at with skill_file (up to 8 paths per call). Load one skill at a "
    "time. A refused call returns isError with a stable 'reason' you can act on."
)


class SkillServer(Server[Any]):
    """The SDK server with one change: a narrowed server advertises tools only."""

    def __init__(self, *, advertise_content: bool, announcer: ChangeAnnouncer | None = None, **kwargs: Any) -> None:
        super().__init__(SERVER_NAME, **kwargs)
        self.advertise_content = advertise_content
        # Set when the catalog can change while serving (``serve --watch``): call
        # ``await server.announcer.announce()`` after swapping the catalog.
        self.announcer = announcer

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        if self.announcer is not None:
            # Handshake era: the lists can change and the announcer sends list_changed. (At
            # 2026-07-28 the SDK derives these flags from subscriptions/listen being served.)
            notification_options = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        caps = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            # logging/setLevel is a handshake-era method (removed at 2026-07-28; the SDK answers -32601).
            caps = caps.model_copy(update={"logging": None})
        if self.advertise_content:
            return caps
        return caps.model_copy(update={"prompts": None, "resources": None, "extensions": None})


def nothing_offered(enabled: frozenset[str], known: Sequence[str]) -> str:
    """Why a narrowed server offers nothing, in words a person can act on."""
    unknown = sorted(enabled - set(known))
    said = (
        f"MCP_ENABLED_TOOLS names no tool this server has ({', '.join(unknown)})"
        if unknown
        else "MCP_ENABLED_TOOLS is set but empty"
    )
    return (
        f"{said}, so this server offers no tools, prompts or resources. Unset it to offer everything, "
        f"or name tools from: {', '.join(known)}."
    )


def _select_tools(settings: Settings, specs: Sequence[ToolSpec]) -> list[ToolSpec]:
    if settings.enabled_tools is None:
        return list(specs)
    chosen = [s for s in specs if s.name in settings.enabled_tools]
    known = [s.name for s in specs]
    if not chosen:
        # Narrowing hides prompts and resources too, so an empty selection is a server with
        # nothing at all: one warning that says so, rather than a silent empty list.
        log.warning(nothing_offered(settings.enabled_tools, known))
        return chosen
    for name in sorted(settings.enabled_tools - set(known)):
        log.warning("MCP_ENABLED_TOOLS names a tool this server does not have", extra={"tool": name})
    return chosen


def _instructions(tool_names: Sequence[str], settings: Settings, known: Sequence[str]) -> str:
    return _base_instructions(tool_names, settings, known) + root_notes(settings)


def _base_instructions(tool_names: Sequence[str], settings: Settings, known: Sequence[str]) -> str:
    if not tool_names and settings.enabled_tools is not None:
        return nothing_offered(settings.enabled_tools, known)
    if not {"skill_list", "skill_search", "skill_load"} & set(tool_names):
        # Narrowed to tools that read no catalog: do not point the model at tools it cannot call.
        return "This server serves Agent Skills. Its tools here: " + ", ".join(tool_names) + "."
    found = [t for t in ("skill_search", "skill_list") if t in tool_names]
    return INSTRUCTIONS.format(discover=" or ".join(found) if found else "skill_load with a known name")


def _content_handlers(state: SurfaceState, content: bool) -> dict[str, Any]:
    """Prompt and resource handlers; ``content`` False (narrowed) makes them empty or -32602."""

    async def on_list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        if not content:
            return types.ListPromptsResult(prompts=[])
        return prompts.list_prompts(state.catalog(), params.cursor if params else None)

    async def on_get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if not content:
            raise invalid_params(
                SkillMcpError(
                    Refusal.UNKNOWN_SKILL,
                    "prompts are switched off on this server (MCP_ENABLED_TOOLS)",
                    {"name": params.name},
                )
            )
        catalog = state.catalog()
        try:
            await hold_answer_bytes(state.answers, prompts.body_size(catalog, params.name), ctx)
        except SkillMcpError as err:
            raise invalid_params(err) from None
        return prompts.get_prompt(catalog, params.name)

    async def on_list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        if not content:
            return types.ListResourcesResult(resources=[])
        cursor = params.cursor if params else None
        catalog = await files_checked(
            state.catalog(), lambda c: resources.resources_page_skills(c, cursor), state.refresh
        )
        return resources.list_resources(catalog, cursor)

    async def on_list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        # Every served file has a concrete URI, so there is no template to offer; the method
        # still answers (with cache hints) because clients probe it beside resources/list.
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def on_read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if not content:
            raise unknown_uri(params.uri, "resources are switched off on this server (MCP_ENABLED_TOOLS)")
        try:
            if params.uri.startswith(run_outputs.SCHEME):
                await hold_answer_bytes(state.answers, run_outputs.output_size(state.run_outputs, params.uri, ctx), ctx)
                return run_outputs.read_output(state.run_outputs, params.uri, ctx)
            catalog = await files_checked(
                state.catalog(), lambda c: resources.addressed_skills(c, params.uri), state.refresh
            )
            size = resources.scanned_size(catalog, params.uri)
            if size <= INLINE_READ_BYTES:
                return resources.read_resource(catalog, params.uri)
            await hold_answer_bytes(state.answers, size, ctx)
        except SkillMcpError as err:  # answers-busy: nothing was opened
            raise invalid_params(err) from None
        return await anyio.to_thread.run_sync(resources.read_resource, catalog, params.uri)

    return {
        "on_list_prompts": on_list_prompts,
        "on_get_prompt": on_get_prompt,
        "on_list_resources": on_list_resources,
        "on_list_resource_templates": on_list_templates,
        "on_read_resource": on_read_resource,
    }


def assemble(
    settings: Settings,
    catalog_provider: Callable[[], Catalog],
    *,
    tools: Sequence[ToolSpec] = (),
    script_states: ScriptStates,
    run_outputs: Callable[[], Any] | None = None,
    memo: DigestMemo | None = None,
) -> SkillServer:
    """One server over ``catalog_provider``: the read tools and ``tools``; ``script_states`` is
    what its ``skill_list`` and ``skill_load`` say of scripts (``server.build_server`` passes it);
    ``memo``: the digest memo when answers given before this server existed hold one already."""
    state = SurfaceState(
        settings,
        catalog_provider,
        memo if memo is not None else DigestMemo(),
        script_states,
        run_outputs=run_outputs or (lambda: None),
    )
    specs = [*read_tools(), *tools]
    table = ToolTable(_select_tools(settings, specs), state)
    content = not settings.narrowed

    async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return table.listing()

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        return await table.call(ctx, params)

    hint = CacheHint(ttl_ms=LIST_TTL_MS, scope="public")
    announcer = ChangeAnnouncer() if settings.watch else None
    server = SkillServer(
        advertise_content=content,
        announcer=announcer,
        version=__version__,
        instructions=_instructions(table.names, settings, [s.name for s in specs]),
        cache_hints={
            "tools/list": hint,
            "prompts/list": hint,
            "resources/list": hint,
            "resources/read": hint,
            "resources/templates/list": hint,
        },
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        **_content_handlers(state, content),
    )
    if content:
        _add_skills_extension(server, state)
    if announcer is not None:
        announcer.install(server)
    ClientLogForwarder().install(server)
    server.middleware.append(initialize_detail_middleware())
    return server


def _legacy_extensions_middleware(server: SkillServer) -> Any:
    """Put ``capabilities.extensions`` back into the handshake-era ``initialize`` result.

    The SDK sieves ``initialize`` through the 2025-11-25 result model, which has no
    ``extensions`` field, so a handshake-era client would never learn about the skills
    extension. SEP-2133 advertises extensions at that version too (the conformance suite's
    ``server-legacy-extensions`` reads them there), so they are re-added after the sieve.
    """

    async def middleware(ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict) and server.extensions:
            caps = result.setdefault("capabilities", {})
            if isinstance(caps, dict):
                caps.setdefault("extensions", {k: dict(v) for k, v in server.extensions.items()})
        return result

    return middleware


async def _known_or_hashed(answer: Callable[..., dict[str, Any] | None], *args: Any) -> dict[str, Any]:
    """``answer(*args)`` on the event loop when every digest it needs is known, else in a worker thread."""
    out = answer(*args, known_only=True)
    if out is not None:
        return out
    return await anyio.to_thread.run_sync(_full, answer, *args)


def _full(answer: Callable[..., dict[str, Any] | None], *args: Any) -> dict[str, Any]:
    out = answer(*args)
    if out is None:  # cannot happen: without known_only every file is hashed, never skipped
        raise RuntimeError("a full skills answer came back empty")
    return out


def _add_skills_extension(server: SkillServer, state: SurfaceState) -> None:
    # Entries carry every file's digest. When each one is already known for the file as it is
    # now (one lstat per file), the page is answered on the event loop; when any file must be
    # hashed, the whole answer is computed in a worker thread (a thread hop costs more than
    # the lstats, so it is paid only when there is real work).
    # Each answer carries file facts: its skills' file tier is checked first (``files_checked``).
    # A page whose every file passes both checks on one lstat (``known_page``) is answered from
    # that; otherwise the reference way, which reloads what changed and hashes what it must.
    async def on_skills_list(ctx: Any, params: skills_ext.SkillsListParams) -> dict[str, Any]:
        body = skills_ext.known_page(state.memo, state.catalog(), params.cursor)
        if body is None:
            catalog = await files_checked(
                state.catalog(), lambda c: skills_ext.page_skills(c, params.cursor), state.refresh
            )
            body = await _known_or_hashed(skills_ext.list_skills, state.memo, catalog, params.cursor)
        return skills_ext.for_era(body, ctx.protocol_version)

    async def on_skills_get(ctx: Any, params: skills_ext.SkillsGetParams) -> dict[str, Any]:
        catalog = await files_checked(
            state.catalog(), lambda c: resources.addressed_skills(c, params.uri), state.refresh
        )
        body = await _known_or_hashed(skills_ext.get_skill, state.memo, catalog, params.uri)
        return skills_ext.for_era(body, ctx.protocol_version)

    async def on_directory_read(ctx: Any, params: skills_ext.DirectoryReadParams) -> dict[str, Any]:
        uri = resources.directory_uri(params.uri)
        catalog = await files_checked(state.catalog(), lambda c: resources.addressed_skills(c, uri), state.refresh)
        body = resources.read_directory(catalog, params.uri, params.cursor)
        return skills_ext.for_era(body, ctx.protocol_version, cacheable=False)

    server.extensions[skills_ext.EXTENSION_ID] = dict(skills_ext.CAPABILITY)
    server.middleware.append(_legacy_extensions_middleware(server))
    server.add_request_handler("skills/list", skills_ext.SkillsListParams, on_skills_list)
    server.add_request_handler("skills/get", skills_ext.SkillsGetParams, on_skills_get)
    server.add_request_handler("resources/directory/read", skills_ext.DirectoryReadParams, on_directory_read)
