"""Telling connected clients that the catalog changed (``serve --watch``).

Two eras, two channels. A handshake-era connection gets ``notifications/tools/list_changed``,
``prompts/list_changed`` and ``resources/list_changed`` on its connection-level channel; the
announcer remembers each such connection when it sends ``notifications/initialized``. A
2026-07-28 client opts in with ``subscriptions/listen``, whose response is the stream; the
SDK's ``ListenHandler`` serves it from an in-process bus the announcer publishes to.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)

log = logging.getLogger("skill_mcp.live")


class ChangeAnnouncer:
    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        # One session per open handshake-era connection, dropped when the connection closes.
        self._sessions: dict[int, Any] = {}

    def install(self, server: Any) -> None:
        server.add_notification_handler("notifications/initialized", types.NotificationParams, self._on_initialized)
        server.add_request_handler(
            "subscriptions/listen", types.SubscriptionsListenRequestParams, ListenHandler(self.bus)
        )

    async def _on_initialized(self, ctx: Any, params: Any) -> None:
        session = ctx.session
        key = id(session)
        self._sessions[key] = session
        # SDK 2.3 gives a low-level handler no public handle on its Connection; its session holds
        # it, and the connection's exit stack is the documented place for per-connection teardown.
        connection = getattr(session, "_connection", None)
        if connection is not None:
            connection.exit_stack.callback(self._sessions.pop, key, None)

    @property
    def connections(self) -> int:
        return len(self._sessions)

    async def announce(self) -> None:
        """Tell every connected client that tools, prompts and resources may have changed."""
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
                await session.send_prompt_list_changed()
                await session.send_resource_list_changed()
            except Exception as exc:  # a connection that went away must not stop the others
                log.info("a client missed a list_changed notification", extra={"error": repr(exc)})
                self._sessions.pop(key, None)
        for event in (ToolsListChanged(), PromptsListChanged(), ResourcesListChanged()):
            await self.bus.publish(event)
