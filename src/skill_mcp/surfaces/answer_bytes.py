"""How many bytes of file content the answers being made may hold at once (``AnswerBytes``).

An answer that carries file content holds it several times over until it is written: the bytes
read, the text or base64 made of them, the result, the JSON the SDK serialises from it and the
frame (a 15 MB file through ``resources/read`` took 55 MB of the server's memory). Answers are
made concurrently, a task per request and the reads in worker threads, while the event loop
serialises and writes them one at a time; without a bound, a client that asks for many large
files at once makes the server hold all of them together. 32 concurrent reads of a 15 MB file
took the server to 1.07 GB, past the 512 MiB a container is documented with: the kernel's OOM
killer then ends the server, for every client.

``AnswerBytes.hold(n, owner)`` reserves ``n`` bytes of ``READ_CAPS.answers_at_once`` (16 MiB, a
whole skill's files), counted from the sizes the scan recorded before anything is opened or
read, until the answer has left the server:

- Over HTTP (both protocol eras) the owner is the request's ``Exchange``: the POST and its
  response, which ``EventSizing`` opens for every POST and finishes once its last byte has been
  written to the connection or the connection has closed. The answer waits in the request's
  own task for the client to read it; a client that stops reading keeps its bytes until it
  reads, goes, or is dropped for its stalled write (30 s, ``ConnectionLimits.write_stall_s``),
  so it cannot pile answers up in the server's write buffers.
- On stdio (and for a caller with no exchange) the owner is the task that makes the answer, the
  dispatcher's request task: it ends once the writer, which writes one frame at a time, has
  taken the answer.

The bytes also come back when the request failed or was cancelled: a task's end always runs its
done callbacks, and the exchange is finished on every way out of the POST. With the bound the
same 32 reads peaked at 299 MB (one answer in the making, one being written, the server
itself).

- First come, first served: a request waits until everything that asked before it has been
  let in and its own bytes fit. One larger than the whole budget is let in alone.
- An owner that already holds bytes never waits for more (it would wait for itself): a caller
  making several answers in one task gets each at once, counted until the task ends.
- A request that has waited ``WAIT_S`` is refused with ``answers-busy`` (a client that stopped
  reading large answers cannot hold the others back for ever); nothing was opened or read.
- Answers of at most ``INLINE_READ_BYTES`` reserve nothing: they are made on the event loop and
  bounded, as every answer is, by the requests in flight.

Event-loop only (asyncio): every caller is a request handler, before it reads.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import READ_CAPS
from skill_mcp.reasons import Refusal

LIMIT = READ_CAPS.answers_at_once
# How long a request waits for its bytes before it is refused (answers-busy): long enough for a
# few budgets' worth of answers ahead of it to reach a client reading at 1 MB/s.
WAIT_S = 60.0


class Owner(Protocol):
    """What reserved bytes belong to: it calls each callback, with itself, once when it ends."""

    def add_done_callback(self, fn: Callable[[Any], object], /) -> None: ...


# Where EventSizing puts a POST's Exchange in its ASGI scope (the SDK hands handlers that scope
# as ``ctx.request``, in both eras).
EXCHANGE_KEY = "skill_mcp.answer_exchange"


class Exchange:
    """One HTTP exchange, a POST and its response, as the owner of an answer's bytes."""

    __slots__ = ("_callbacks", "finished")

    def __init__(self) -> None:
        self._callbacks: list[Callable[[Any], object]] = []
        self.finished = False

    def add_done_callback(self, fn: Callable[[Any], object], /) -> None:
        if self.finished:  # AnswerBytes grants a finished exchange's bytes to the task instead
            raise RuntimeError("the exchange has finished")
        self._callbacks.append(fn)

    def finish(self) -> None:
        """The response is written or the connection is gone: what it holds comes back."""
        if self.finished:
            return
        self.finished = True
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)


def exchange_of(request_ctx: Any) -> Exchange | None:
    """The open exchange that carries the request of ``request_ctx`` (the SDK's request
    context); None on stdio, in process, or once the POST has ended (its client went)."""
    scope = getattr(getattr(request_ctx, "request", None), "scope", None)
    exchange = scope.get(EXCHANGE_KEY) if isinstance(scope, dict) else None
    return exchange if isinstance(exchange, Exchange) and not exchange.finished else None


@dataclass(slots=True, eq=False)
class _Waiter:
    need: int
    owner: Owner
    task: asyncio.Task[Any]  # the owner once an exchange it waited for has finished
    granted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class AnswerBytes:
    """The bytes of file content the answers in progress hold, bounded (see the module)."""

    def __init__(self, limit: int = LIMIT, wait_s: float = WAIT_S) -> None:
        if limit <= 0:
            raise ValueError("the budget must be positive")
        self.limit = limit
        self.wait_s = wait_s
        self.held = 0
        self._owners: dict[Owner, int] = {}  # what each owner holds
        self._queue: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        return len(self._queue)

    async def hold(self, nbytes: int, owner: Owner | None = None) -> None:
        """Reserve ``nbytes`` (at most the whole budget) until ``owner`` ends (the current task
        when None); wait for them first when they do not fit, and refuse (``answers-busy``)
        past ``wait_s``."""
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - every caller is a coroutine run by a task
            raise RuntimeError("AnswerBytes.hold needs a running task")
        owner = task if owner is None else owner
        need = max(0, min(nbytes, self.limit))
        if need == 0:
            return
        if owner in self._owners or (not self._queue and self._fits(need)):
            self._grant(owner, need, task)
            return
        waiter = _Waiter(need, owner, task)
        self._queue.append(waiter)
        started = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.shield(waiter.granted), self.wait_s)
        except BaseException as exc:
            if waiter.granted.done() and not waiter.granted.cancelled():
                return self._granted_late(exc)  # granted as it timed out or was cancelled
            waiter.granted.cancel()
            self._queue.remove(waiter)
            self._admit()  # the head leaving may let the next ones in
            if isinstance(exc, TimeoutError):
                raise SkillMcpError(
                    Refusal.ANSWERS_BUSY,
                    "the server is already sending as much file content as it holds at once; ask again shortly",
                    {
                        "bytes": nbytes,
                        "heldBytes": self.held,
                        "limit": self.limit,
                        "waitedSeconds": round(time.monotonic() - started, 1),
                    },
                ) from None
            raise

    def _granted_late(self, exc: BaseException) -> None:
        """The bytes were granted while the wait ended: a timeout keeps them (the answer goes
        on); a cancellation is re-raised, and the owner's end gives them back."""
        if isinstance(exc, TimeoutError):
            return
        raise exc

    def _fits(self, need: int) -> bool:
        return self.held == 0 or self.held + need <= self.limit

    def _grant(self, owner: Owner, need: int, task: asyncio.Task[Any]) -> None:
        if isinstance(owner, Exchange) and owner.finished:
            # Its POST ended while this waited (the client went; a handshake-era request goes on
            # without it): the answer is made all the same, and its task holds the bytes.
            owner = task
        self.held += need
        if owner in self._owners:
            self._owners[owner] += need
        else:
            self._owners[owner] = need
            owner.add_done_callback(self._release)

    def _release(self, owner: Owner) -> None:
        self.held -= self._owners.pop(owner, 0)
        self._admit()

    def _admit(self) -> None:
        while self._queue and self._fits(self._queue[0].need):
            waiter = self._queue.popleft()
            self._grant(waiter.owner, waiter.need, waiter.task)
            waiter.granted.set_result(None)
