"""``AnswerBytes``: the file content answers in progress hold is bounded, first come first served,
and every way out of a request gives its bytes back (``surfaces.answer_bytes``).

Each case runs requests as the dispatcher does, one task per request, on a real event loop; a
request "answers" by returning, which ends its task. The denials proven: a request whose bytes
do not fit waits (its read has not started) and is refused with ``answers-busy`` past the wait;
the positive controls: what fits goes at once, what waited goes as soon as bytes come back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import READ_CAPS
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces import answer_bytes
from skill_mcp.surfaces.answer_bytes import EXCHANGE_KEY, AnswerBytes, Exchange, exchange_of


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), 20))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class Requests:
    """Request tasks that hold bytes and then wait for a go before they answer."""

    def __init__(self, budget: AnswerBytes) -> None:
        self.budget = budget
        self.order: list[str] = []  # names, in the order their bytes were granted
        self.go: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, name: str, nbytes: int) -> asyncio.Task[None]:
        self.go[name] = asyncio.Event()

        async def request() -> None:
            await self.budget.hold(nbytes)
            self.order.append(name)
            await self.go[name].wait()

        self.tasks[name] = asyncio.ensure_future(request())
        return self.tasks[name]

    async def answer(self, name: str) -> None:
        self.go[name].set()
        await self.tasks[name]
        await settle()


def test_the_budget_is_the_read_caps_field() -> None:
    assert answer_bytes.LIMIT == READ_CAPS.answers_at_once == 16 * 1024 * 1024
    assert AnswerBytes().limit == answer_bytes.LIMIT
    with pytest.raises(ValueError):
        AnswerBytes(0)


def test_what_fits_goes_at_once_and_the_rest_waits_first_come_first_served() -> None:
    async def body() -> None:
        r = Requests(AnswerBytes(100))
        r.start("a", 60)
        r.start("b", 40)
        await settle()
        assert r.order == ["a", "b"] and r.budget.held == 100  # the control: both fit
        r.start("c", 30)
        r.start("d", 10)  # would fit after c, but c asked first
        await settle()
        assert r.order == ["a", "b"] and r.budget.waiting == 2  # the denial: neither starts its read
        await r.answer("b")  # 40 back: c (30) and then d (10) fit
        assert r.order == ["a", "b", "c", "d"] and r.budget.held == 100
        for name in "acd":
            await r.answer(name)
        assert r.budget.held == 0 and r.budget.waiting == 0

    run(body)


def test_one_answer_larger_than_the_budget_is_made_alone() -> None:
    async def body() -> None:
        r = Requests(AnswerBytes(100))
        r.start("small", 10)
        r.start("huge", 10_000)
        r.start("after", 10)
        await settle()
        assert r.order == ["small"]  # huge waits for an empty budget, and after waits behind it
        await r.answer("small")
        assert r.order == ["small", "huge"] and r.budget.held == 100  # counted as the whole budget
        await r.answer("huge")
        assert r.order == ["small", "huge", "after"]
        await r.answer("after")
        assert r.budget.held == 0

    run(body)


@pytest.mark.parametrize("way_out", ["answer", "error", "cancel"])
def test_every_way_out_of_a_request_gives_its_bytes_back(way_out: str) -> None:
    async def body() -> None:
        budget = AnswerBytes(100)
        r = Requests(budget)
        holder_go = asyncio.Event()

        async def holder() -> None:
            await budget.hold(80)
            await holder_go.wait()
            if way_out == "error":
                raise OSError("the read failed")

        task = asyncio.ensure_future(holder())
        await settle()
        r.start("next", 80)
        await settle()
        assert r.order == [] and budget.held == 80
        if way_out == "cancel":
            task.cancel()
        else:
            holder_go.set()
        await asyncio.gather(task, return_exceptions=True)
        await settle()
        assert r.order == ["next"] and budget.held == 80  # the holder's 80 came back, next took 80
        await r.answer("next")
        assert budget.held == 0

    run(body)


def test_a_request_cancelled_while_it_waits_leaves_the_line() -> None:
    async def body() -> None:
        r = Requests(AnswerBytes(100))
        r.start("a", 90)
        r.start("blocked", 50)
        r.start("behind", 10)  # fits beside a, but waits behind blocked
        await settle()
        assert r.order == ["a"]
        r.tasks["blocked"].cancel()
        await asyncio.gather(r.tasks["blocked"], return_exceptions=True)
        await settle()
        assert r.order == ["a", "behind"] and r.budget.waiting == 0 and r.budget.held == 100
        for name in ("a", "behind"):
            await r.answer(name)
        assert r.budget.held == 0

    run(body)


def test_a_task_that_holds_bytes_never_waits_for_more() -> None:
    """Several answers made in one task (a caller outside a server) would wait for themselves."""

    async def body() -> None:
        budget = AnswerBytes(100)

        async def sequential() -> int:
            for _ in range(5):
                await budget.hold(60)
            return budget.held

        assert await asyncio.ensure_future(sequential()) == 300
        await settle()
        assert budget.held == 0  # all of it came back when the task ended

    run(body)


def test_a_request_that_waited_too_long_is_refused_with_answers_busy() -> None:
    async def body() -> None:
        budget = AnswerBytes(100, wait_s=0.2)
        r = Requests(budget)
        r.start("stalled", 100)  # an answer whose client stopped reading
        await settle()
        with pytest.raises(SkillMcpError) as refused:
            await asyncio.ensure_future(budget.hold(10))
        assert refused.value.reason == Refusal.ANSWERS_BUSY
        assert refused.value.data["bytes"] == 10 and refused.value.data["limit"] == 100
        assert refused.value.data["heldBytes"] == 100 and refused.value.data["waitedSeconds"] >= 0.2
        assert budget.waiting == 0  # it left the line
        await r.answer("stalled")
        r.start("later", 10)  # the control: once the bytes are back, the next one goes at once
        await settle()
        assert r.order == ["stalled", "later"]
        await r.answer("later")
        assert budget.held == 0

    run(body)


def test_nothing_and_negative_sizes_hold_nothing() -> None:
    async def body() -> None:
        budget = AnswerBytes(100)
        r = Requests(budget)
        r.start("full", 100)
        r.start("empty", 0)
        r.start("negative", -5)
        await settle()
        assert r.order == ["full", "empty", "negative"] and budget.held == 100
        for name in ("full", "empty", "negative"):
            await r.answer(name)
        assert budget.held == 0

    run(body)


def test_a_thousand_requests_of_random_sizes_never_overrun_and_all_finish() -> None:
    import random

    async def body() -> None:
        rng = random.Random(7)
        budget = AnswerBytes(1000)
        peak = 0

        async def request(n: int) -> None:
            nonlocal peak
            await budget.hold(n)
            peak = max(peak, budget.held)
            await asyncio.sleep(rng.random() / 1000)

        sizes = [rng.choice([1, 10, 100, 400, 999, 5000]) for _ in range(1000)]
        await asyncio.gather(*(asyncio.ensure_future(request(n)) for n in sizes))
        await settle()
        assert peak <= 1000 and budget.held == 0 and budget.waiting == 0

    run(body)


def test_over_http_the_bytes_stay_reserved_until_the_exchange_finishes_not_the_task() -> None:
    """Over HTTP an answer waits, after its handler's task has ended, for its client to read it:
    the denial is that a stalled reader's bytes stay counted (the next large answer waits); the
    control, that they come back the moment its exchange finishes."""

    async def body() -> None:
        budget = AnswerBytes(100)
        exchange = Exchange()

        async def handler() -> None:
            await budget.hold(80, exchange)

        await asyncio.ensure_future(handler())  # the handler returned: its answer is being written
        await settle()
        assert budget.held == 80
        r = Requests(budget)
        r.start("next", 80)
        await settle()
        assert r.order == []  # the denial
        exchange.finish()
        await settle()
        assert r.order == ["next"] and budget.held == 80  # the control
        exchange.finish()  # finishing twice gives nothing back twice
        await r.answer("next")
        assert budget.held == 0

    run(body)


def test_an_exchange_that_holds_bytes_never_waits_for_more() -> None:
    async def body() -> None:
        budget = AnswerBytes(100)
        exchange = Exchange()

        async def two_answers() -> None:
            await budget.hold(60, exchange)
            await budget.hold(60, exchange)

        await asyncio.ensure_future(two_answers())
        assert budget.held == 120
        exchange.finish()
        assert budget.held == 0

    run(body)


def test_a_request_whose_exchange_finished_while_it_waited_is_held_by_its_task() -> None:
    """A handshake-era request goes on after its POST is gone: when its turn comes its bytes are
    held by its own task until the answer is made, never counted as given back at once (which
    would let every abandoned request read its file together)."""

    async def body() -> None:
        budget = AnswerBytes(100)
        first = Exchange()
        await asyncio.ensure_future(budget.hold(100, first))
        gone = Exchange()
        go = asyncio.Event()

        async def abandoned() -> None:
            await budget.hold(70, gone)
            await go.wait()

        task = asyncio.ensure_future(abandoned())
        await settle()
        gone.finish()  # its client went while it waited
        first.finish()
        await settle()
        assert budget.held == 70 and budget.waiting == 0  # held by the task, not released
        with pytest.raises(RuntimeError):
            gone.add_done_callback(lambda _: None)
        go.set()
        await task
        await settle()
        assert budget.held == 0

    run(body)


class _Ctx:
    def __init__(self, scope: object) -> None:
        self.request = type("Request", (), {"scope": scope})()


def test_exchange_of_finds_only_an_open_exchange_in_the_request_scope() -> None:
    open_one = Exchange()
    assert exchange_of(_Ctx({EXCHANGE_KEY: open_one})) is open_one
    done = Exchange()
    done.finish()
    for ctx in (None, object(), _Ctx(None), _Ctx({}), _Ctx({EXCHANGE_KEY: "forged"}), _Ctx({EXCHANGE_KEY: done})):
        assert exchange_of(ctx) is None
