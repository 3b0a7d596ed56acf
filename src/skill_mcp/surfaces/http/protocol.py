"""uvicorn's h11 protocol with a request-head deadline, connection caps and an in-flight limit.

``GatedH11Protocol`` is handed to ``uvicorn.Config(http=...)``; everything else of uvicorn (the
parser, keep-alive, the ASGI cycle, its graceful shutdown) stays as it is. It tells the
``ConnectionGate`` (``surfaces.http.conn``) each state change of its connection:

* opened: admitted, possibly evicting the oldest waiting connection of its peer (or of the
  heaviest peer at the global cap); the head deadline starts;
* head complete (uvicorn starts a request cycle): in flight, the deadline is off; a request
  over ``max_in_flight`` is answered 503 ``http-busy`` before any other layer sees it;
* answer complete: waiting again, and the deadline starts again (uvicorn's keep-alive timer
  also runs: an idle connection goes after ``keep_alive_s``, a slow head after
  ``head_timeout_s``);
* closed: forgotten.

Apart from those states, a write deadline: when the transport pauses writing (its buffer is
over the high-water mark: the client is not reading), a timer of ``write_stall_s`` starts, and
stops when the buffer drains below the low-water mark. If it fires, the connection is aborted
(``write-stall``): its buffer is dropped, the request sees the disconnect, and the answer's
reserved bytes (``surfaces.answer_bytes``) and its in-flight slot come back.

The h11 implementation is chosen on purpose (not httptools): it bounds the head's size
(``max_head_bytes``) in the parser, and these hooks rely on its protocol class
(``handle_events``, ``on_response_complete``, ``cycle``), which the tests in tests/http exercise
on the installed uvicorn.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.http.conn import ConnectionGate, ShedTally, peer_key

__all__ = ["GatedH11Protocol", "Shedding"]

logger = logging.getLogger("skill_mcp.http")


class Shedding:
    """The gate and the rate-limited log of what it shed, shared by every connection."""

    def __init__(self, gate: ConnectionGate, tally: ShedTally | None = None) -> None:
        self.gate = gate
        self.tally = tally if tally is not None else ShedTally()

    def note(self, cause: str, peer: str) -> None:
        loop = asyncio.get_running_loop()
        due = self.tally.add(cause, peer, loop.time())
        if due is not None:
            loop.call_later(due, self._flush)

    def _flush(self) -> None:
        summary = self.tally.take(asyncio.get_running_loop().time())
        logger.warning(
            "http connections shed: %d (%s)",
            summary["total"],
            ", ".join(f"{cause} {n}" for cause, n in sorted(summary["causes"].items())),
            extra={
                "event": "http-connections-shed",
                **summary,
                "open": self.gate.total,
                "inFlight": self.gate.in_flight,
            },
        )


def _busy_body() -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "the server has too many requests in flight; retry shortly",
            "data": {"reason": str(Refusal.HTTP_BUSY)},
        },
    }
    return json.dumps(body).encode()


class GatedH11Protocol(H11Protocol):
    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        shedding: Shedding,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.shedding = shedding
        self.gate = shedding.gate
        self.peer = ""
        self._inner_app = self.app
        self.app = self._app_unless_busy
        self._head_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._flying = False

    # The connection's life, as the gate sees it.

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.peer = peer_key(self.client)
        admitted, evicted = self.gate.admit(self)
        for victim, cause in evicted:
            victim.evict()
            self.shedding.note(cause, victim.peer)
        if not admitted:
            self.shedding.note("refused", self.peer)
            self.transport.close()
            return
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        self._disarm_write_deadline()
        self.gate.forget(self)
        super().connection_lost(exc)

    def evict(self) -> None:
        self._disarm_head_deadline()
        if not self.transport.is_closing():
            self.transport.close()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before and self.cycle is not None and not self._flying:
            # uvicorn started a request cycle: the head is complete.
            self._flying = True
            self._disarm_head_deadline()
            self.gate.started(self)

    def on_response_complete(self) -> None:
        if self._flying:
            self._flying = False
            self.gate.finished(self)
            if not self.transport.is_closing():
                self._arm_head_deadline()
        # Last: uvicorn may start a pipelined request here (handle_events above sees it).
        super().on_response_complete()

    # The head deadline.

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(self.gate.limits.head_timeout_s, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if self._flying or self.transport.is_closing():
            return
        self.shedding.note("head-timeout", self.peer)
        self.gate.forget(self)
        self.transport.close()

    # The write deadline: a client that takes nothing of what is written to it.

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.gate.limits.write_stall_s, self._write_stalled)

    def resume_writing(self) -> None:
        self._disarm_write_deadline()
        super().resume_writing()

    def _disarm_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _write_stalled(self) -> None:
        self._write_deadline = None
        self.shedding.note("write-stall", self.peer)
        # abort, not close: close would wait for the buffer to reach a client that does not read.
        self.transport.abort()

    # The concurrency limit: requests in flight only.

    async def _app_unless_busy(self, scope: Scope, receive: Receive, send: Send) -> None:
        # By the time the cycle's task runs, handle_events has counted this request.
        if scope["type"] == "http" and self.gate.in_flight > self.gate.limits.max_in_flight:
            self.shedding.note("busy", self.peer)
            body = _busy_body()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"retry-after", b"1"),
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._inner_app(scope, receive, send)
