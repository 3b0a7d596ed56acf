"""``logging/setLevel``: this server's own log records, forwarded to the client that asked.

Handshake era only (2026-07-28 removed the method; the SDK answers it ``-32601`` there, and the
capability is not advertised in that era). After ``logging/setLevel {level}`` a connection gets
``notifications/message`` for every record of the ``skill_mcp`` loggers at or above that level:
the logger's name and the message text, never the record's extra fields, so nothing a script
printed and no token or variable value can travel this way. Records are still written to stderr
as usual; forwarding is in addition.

A record can be logged from any thread (file reads run in worker threads), so ``emit`` only
schedules the send on the event loop; sends are fire-and-forget and capped, and a record logged
while forwarding is not forwarded again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from typing import Any

import mcp_types as types

_TO_MCP: tuple[tuple[int, types.LoggingLevel], ...] = (
    (logging.CRITICAL, "critical"),
    (logging.ERROR, "error"),
    (logging.WARNING, "warning"),
    (logging.INFO, "info"),
    (logging.DEBUG, "debug"),
)
_FROM_MCP = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}
MAX_PENDING_SENDS = 100
LOGGER = "skill_mcp"
_FORWARDING: contextvars.ContextVar[bool] = contextvars.ContextVar("skill_mcp_forwarding_log", default=False)


def mcp_level(levelno: int) -> types.LoggingLevel:
    for floor, name in _TO_MCP:
        if levelno >= floor:
            return name
    return "debug"


class ClientLogForwarder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self._subscribers: dict[int, tuple[Any, int]] = {}  # connection key -> (session, levelno)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[asyncio.Task[None]] = set()

    def install(self, server: Any) -> None:
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._on_set_level)

    async def _on_set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        session = ctx.session
        connection = getattr(session, "_connection", None)  # see surfaces.live for why
        key = id(connection if connection is not None else session)
        if key not in self._subscribers and connection is not None:
            connection.exit_stack.callback(self._unsubscribe, key)
        self._subscribers[key] = (session, _FROM_MCP.get(params.level, logging.INFO))
        self._loop = asyncio.get_running_loop()
        logger = logging.getLogger(LOGGER)
        if self not in logger.handlers:
            logger.addHandler(self)
        return types.EmptyResult()

    def _unsubscribe(self, key: int) -> None:
        self._subscribers.pop(key, None)
        if not self._subscribers:
            logging.getLogger(LOGGER).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if _FORWARDING.get() or self._loop is None or self._loop.is_closed():
            return
        targets = [session for session, levelno in list(self._subscribers.values()) if record.levelno >= levelno]
        if not targets:
            return
        params = types.LoggingMessageNotificationParams(
            level=mcp_level(record.levelno), logger=record.name, data=record.getMessage()
        )
        for session in targets:
            self._loop.call_soon_threadsafe(self._spawn, session, params)

    def _spawn(self, session: Any, params: types.LoggingMessageNotificationParams) -> None:
        if len(self._pending) >= MAX_PENDING_SENDS:
            return  # a client that cannot keep up loses log lines, never the server its memory
        task = asyncio.get_running_loop().create_task(self._send(session, params))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _send(self, session: Any, params: types.LoggingMessageNotificationParams) -> None:
        _FORWARDING.set(True)  # this task's own context: a record logged while sending stays local
        # A gone client is not worth a log line (which would only loop back here).
        with contextlib.suppress(Exception):
            await session.send_notification(types.LoggingMessageNotification(params=params))
