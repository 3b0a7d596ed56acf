"""The protocol side of ``serve --watch``: tell clients the lists changed.

Both protocol eras are served, and they learn about changes differently:

* handshake era (``initialize``): the server advertises ``listChanged: true`` for tools,
  prompts and resources and sends ``notifications/tools/list_changed``,
  ``notifications/prompts/list_changed`` and ``notifications/resources/list_changed`` on the
  connection. The connection is learned from the requests it makes (a middleware notes the
  session of each one), so nothing here reaches into the SDK's private state.
* 2026-07-28 era: change notifications travel only on a ``subscriptions/listen`` stream the
  client opened. A ``ListenHandler`` over an in-memory bus serves that method, and a change
  is published on the bus as ``ToolsListChanged`` / ``PromptsListChanged`` /
  ``ResourcesListChanged``.

The tool list itself does not change with the catalog, but ``skill_list``'s answer does, and
a client that caches ``tools/list`` refetches on the notification; sending all three keeps
every cache honest.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)

from skill_mcp.catalog import build_catalog
from skill_mcp.config import Settings
from skill_mcp.surfaces.stdio import answer_unparseable
from skill_mcp.watch import LiveCatalog, watch_catalog

log = logging.getLogger("skill_mcp.reload")

MODERN_PREFIX = "2026-"
MAX_SESSIONS = 64  # handshake-era connections remembered for notifications (stdio has one)
CHANGED = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)


class ChangeNotifier:
    """Fans one "the catalog changed" out to every connected client, in its era's way."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self._sessions: dict[int, Any] = {}

    def install(self, server: Any) -> None:
        """Serve ``subscriptions/listen`` and note handshake-era sessions as they make requests."""
        server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, self.listen)

        async def note_session(ctx: Any, call_next: Any) -> Any:
            session = getattr(ctx, "session", None)
            version = str(getattr(ctx, "protocol_version", "") or "")
            if session is not None and not version.startswith(MODERN_PREFIX):
                key = id(getattr(session, "_connection", session))
                if key in self._sessions or len(self._sessions) < MAX_SESSIONS:
                    self._sessions[key] = session
            return await call_next(ctx)

        server.middleware.append(note_session)

    async def notify(self) -> None:
        for session in list(self._sessions.values()):
            for send in (session.send_tool_list_changed, session.send_prompt_list_changed,
                         session.send_resource_list_changed):
                try:
                    await send()
                except Exception as exc:  # a closed connection must not stop the others
                    log.info("could not notify a connection", extra={"error": repr(exc)})
        for event in (ToolsListChanged(), PromptsListChanged(), ResourcesListChanged()):
            await self.bus.publish(event)


async def serve_stdio_watch(settings: Settings) -> int:
    """``serve --watch`` over stdio: serve, watch the roots, swap and notify on change."""
    from skill_mcp.logs import configure_logging
    from skill_mcp.server import build_server

    configure_logging(settings.log_level)
    live = LiveCatalog(build_catalog(settings))
    server = build_server(settings, live)
    notifier = ChangeNotifier()
    notifier.install(server)
    log.info("serving over stdio with --watch", extra={"skills": len(live().skills),
                                                       "roots": [str(r) for r in settings.roots]})
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch_catalog, settings, live, notifier.notify)
        async with stdio_server() as (read, write), answer_unparseable(read, write) as (inbound, outbound):
            await server.run(inbound, outbound, server.create_initialization_options(CHANGED))
        notifier.listen.close()
        tg.cancel_scope.cancel()
    log.info("stdin closed; exiting")
    return 0
