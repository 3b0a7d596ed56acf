"""How many bytes of file content the answers being made may hold at once (``AnswerBytes``).

An answer that carries file content holds it several times over until it is written: the bytes
read, the text or base64 made of them, the result, the JSON the SDK serialises from it and the
frame (a 15 MB file through ``resources/read`` took 55 MB of the server's memory). Answers are
made concurrently, a task per request and the reads in worker threads, while the event loop
serialises and writes them one at a time; without a bound, a client that asks for many large
files at once makes the server hold all of them together. 32 concurrent reads of a 15 MB file
took the server to 1.07 GB, past the 512 MiB a container is documented with: the kernel's OOM
killer then ends the server, for every client.

``AnswerBytes.hold(n)`` reserves ``n`` bytes of ``READ_CAPS.answers_at_once`` (16 MiB, a whole
skill's files), counted from the sizes the scan recorded before anything is opened or read, for
the rest of the request's task. The reservation ends when that task ends: after the dispatcher
has handed the answer to the transport (on stdio the writer has taken it, and it writes one
frame at a time), or when the request failed or was cancelled. A task's end always runs its
done callbacks, so no way out of a request keeps bytes reserved. With the bound the same 32
reads peaked at 299 MB (one answer in the making, one being written, the server itself).

- First come, first served: a request waits until everything that asked before it has been
  let in and its own bytes fit. One larger than the whole budget is let in alone.
- A task that already holds bytes never waits for more (it would wait for itself): a caller
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
from dataclasses import dataclass, field
from typing import Any

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import READ_CAPS
from skill_mcp.reasons import Refusal

LIMIT = READ_CAPS.answers_at_once
# How long a request waits for its bytes before it is refused (answers-busy): long enough for a
# few budgets' worth of answers ahead of it to reach a client reading at 1 MB/s.
WAIT_S = 60.0


@dataclass(slots=True, eq=False)
class _Waiter:
    need: int
    task: asyncio.Task[Any]
    granted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class AnswerBytes:
    """The bytes of file content the answers in progress hold, bounded (see the module)."""

    def __init__(self, limit: int = LIMIT, wait_s: float = WAIT_S) -> None:
        if limit <= 0:
            raise ValueError("the budget must be positive")
        self.limit = limit
        self.wait_s = wait_s
        self.held = 0
        self._tasks: dict[asyncio.Task[Any], int] = {}  # what each task holds
        self._queue: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        return len(self._queue)

    async def hold(self, nbytes: int) -> None:
        """Reserve ``nbytes`` (at most the whole budget) until the current task ends; wait for
        them first when they do not fit, and refuse (``answers-busy``) past ``wait_s``."""
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - every caller is a coroutine run by a task
            raise RuntimeError("AnswerBytes.hold needs a running task")
        need = max(0, min(nbytes, self.limit))
        if need == 0:
            return
        if task in self._tasks or (not self._queue and self._fits(need)):
            self._grant(task, need)
            return
        waiter = _Waiter(need, task)
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
        on); a cancellation is re-raised, and the task's end gives them back."""
        if isinstance(exc, TimeoutError):
            return
        raise exc

    def _fits(self, need: int) -> bool:
        return self.held == 0 or self.held + need <= self.limit

    def _grant(self, task: asyncio.Task[Any], need: int) -> None:
        self.held += need
        if task in self._tasks:
            self._tasks[task] += need
        else:
            self._tasks[task] = need
            task.add_done_callback(self._release)

    def _release(self, task: asyncio.Task[Any]) -> None:
        self.held -= self._tasks.pop(task, 0)
        self._admit()

    def _admit(self) -> None:
        while self._queue and self._fits(self._queue[0].need):
            waiter = self._queue.popleft()
            self._grant(waiter.task, waiter.need)
            waiter.granted.set_result(None)
