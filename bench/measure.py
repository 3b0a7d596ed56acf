"""The measurements. Each takes server specs and returns raw samples in seconds (or KiB).

Interleaving: every repetition visits every server before the next repetition starts, and
per-call figures alternate one floor call with one call of ours, so a slow moment of this
shared machine lands on both sides rather than on one.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
from pydantic import TypeAdapter

from bench.floor import TOOL as FLOOR_TOOL
from bench.servers import CALL_TIMEOUT_S, ServerSpec, peak_rss_kib, session

_RAW = TypeAdapter(dict[str, Any])
Op = Callable[[Any, int], Awaitable[Any]]


class _UriParams(types.RequestParams):
    uri: str


class SkillsListRequest(types.Request[types.PaginatedRequestParams, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"


class SkillsGetRequest(types.Request[_UriParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"


async def skills_list(client: Any, cursor: str | None = None) -> dict[str, Any]:
    req = SkillsListRequest(params=types.PaginatedRequestParams(cursor=cursor))
    return await client.session.send_request(req, _RAW)


async def skills_get(client: Any, uri: str) -> dict[str, Any]:
    return await client.session.send_request(SkillsGetRequest(params=_UriParams(uri=uri)), _RAW)


async def floor_call(client: Any, i: int) -> Any:
    return await client.call_tool(FLOOR_TOOL, {})


def structured(result: types.CallToolResult) -> dict[str, Any]:
    if result.is_error or result.structured_content is None:
        text = result.content[0].text if result.content and isinstance(result.content[0], types.TextContent) else ""
        raise RuntimeError(f"tool call failed: {text[:500]}")
    return dict(result.structured_content)


@dataclass(slots=True)
class Ready:
    initialize: list[float] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)


async def ready_runs(specs: Sequence[ServerSpec], runs: int) -> dict[str, Ready]:
    """spawn -> initialize result -> tools/list result, ``runs`` times per server, interleaved."""
    out = {spec.label: Ready() for spec in specs}
    for rep in range(runs):
        order = list(specs[rep % len(specs):]) + list(specs[:rep % len(specs)])
        for spec in order:
            async with session(spec) as s:
                await s.client.list_tools()
                done = time.perf_counter()
                out[spec.label].initialize.append(s.initialized_at - s.spawned_at)
                out[spec.label].ready.append(done - s.spawned_at)
    return out


async def peak_memory(spec: ServerSpec, first_call: Op) -> int:
    """VmHWM (KiB) of the server after its first call of ``first_call``."""
    async with session(spec) as s:
        if s.pid is None:
            raise RuntimeError("the server process was not found among this process's children")
        await first_call(s.client, 0)
        return peak_rss_kib(s.pid)


async def alternate(floor_client: Any, ours_client: Any, op: Op, calls: int, warmup: int = 5) -> tuple[list[float], list[float]]:
    """Alternate one floor call and one ``op`` call ``calls`` times; return both sample lists."""
    for i in range(warmup):
        await floor_call(floor_client, i)
        await op(ours_client, i)
    floor: list[float] = []
    ours: list[float] = []
    for i in range(calls):
        pair = ((floor_call, floor_client, floor), (op, ours_client, ours))
        for fn, client, sink in (pair if i % 2 == 0 else pair[::-1]):
            start = time.perf_counter()
            await fn(client, i)
            sink.append(time.perf_counter() - start)
    return floor, ours


def interpreter_path(name: str) -> str | None:
    return shutil.which({"python": "python3"}.get(name, name))


def direct_spawn(argv: Sequence[str], cwd: str, runs: int) -> list[float]:
    """Spawn the interpreter on the script directly from Python: the figure skill_run is held to."""
    out: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(list(argv), cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=CALL_TIMEOUT_S,
                       check=True)
        out.append(time.perf_counter() - start)
    return out
