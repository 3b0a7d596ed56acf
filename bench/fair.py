"""The same-size floor: each read call against the floor answering the identical bytes.

The trivial floor tool answers ``pong``; our read calls answer up to 25 KB (a ``skills/list``
page), and much of what such a call costs is the SDK's, not ours: serialising the result, the
client's parse of the JSON-RPC message, its check of ``structuredContent``. To see only what our
server adds, every read request is first sent to our server once and its answer recorded; a floor
server (``bench/floor.py --replay``) then answers the identical request with the identical answer,
with nothing to compute. Ours / that floor is the ratio the read-side target (≤ 1.3x) is held to.

Requests are described as ``(method, params)`` so that one description drives our server, the
recording and the replaying floor alike; :func:`send` issues them through the SDK client's own
high-level calls (``call_tool``, ``read_resource``), as a client would.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter

from bench.floor import AnyParams, request_key
from bench.measure import skills_get, skills_list
from bench.servers import FLOOR_FILE, ServerSpec

Request = tuple[str, dict[str, Any]]
RequestAt = Callable[[int], Request]  # the i-th request of one measured call
_RAW = TypeAdapter(dict[str, Any])


class RawRequest(types.Request[AnyParams, str]):
    """Any method with any params: how the recording gets the answer as the wire carried it."""

    method: str


async def send(client: Any, request: Request) -> Any:
    """Issue ``request`` the way a client would (the high-level call for standard methods)."""
    method, params = request
    if method == "tools/call":
        return await client.call_tool(params["name"], params.get("arguments") or {})
    if method == "resources/read":
        return await client.read_resource(params["uri"])
    if method == "skills/list":
        return await skills_list(client, params.get("cursor"))
    if method == "skills/get":
        return await skills_get(client, params["uri"])
    raise ValueError(f"no way to send {method}")


async def raw(client: Any, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = await client.session.send_request(
        RawRequest(method=method, params=AnyParams(**params)), _RAW
    )
    return answer


async def record(client: Any, requests: Mapping[str, RequestAt], count: int, out: Path) -> Path:
    """Our answers to the first ``count`` requests of each call (and to ``tools/list``), as the
    replaying floor reads them. Requests repeat (calls cycle over samples): each is sent once."""
    seen: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
    entries: list[Request] = [("tools/list", {})]
    entries += [request_at(i) for request_at in requests.values() for i in range(count)]
    for method, params in entries:
        key = request_key(method, params)
        if key not in seen:
            seen[key] = (method, params, await raw(client, method, params))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"answers": list(seen.values())}), encoding="utf-8")
    return out


def replay_spec(answers: Path, our_transport: bool = False) -> ServerSpec:
    """The floor replaying ``answers`` (on the SDK's stdio transport, or on ours)."""
    command = (sys.executable, str(FLOOR_FILE), "--replay", str(answers))
    if our_transport:
        return ServerSpec("same-size floor (skill-mcp transport)", (*command, "--skill-mcp-transport"))
    return ServerSpec("same-size floor", command)


def cpu_seconds(pid: int | None) -> float:
    """CPU time a live process's threads have run so far, in seconds, or NaN: the scheduler's
    nanosecond counts (``/proc/<pid>/task/*/schedstat``), where ``stat``'s clock ticks (10 ms)
    would be far too coarse for calls of a millisecond. A thread that ended is not counted, so
    compare processes whose threads live as long as the measurement (worker threads do)."""
    if pid is None:
        return math.nan
    total = 0
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            with open(f"{task.path}/schedstat", encoding="ascii") as handle:
                total += int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan
    return total / 1e9


async def wait_idle(
    pid: int | None, *, window_s: float = 0.5, busy_share: float = 0.05, timeout_s: float = 240.0
) -> float:
    """Wait until the process ``pid`` uses less than ``busy_share`` of a core over ``window_s``
    (at most ``timeout_s``); the seconds waited. The recording's ``skill_search`` starts the
    full index build, in a worker process (``search.offload``) or, failing that, in a
    background thread of the server, which at 10,000 skills runs for a minute or more and takes
    the GIL at every system call of the event loop: per-call figures measured during a thread
    build are the build's, not the call's (a ``skills/list`` page 3.1 ms idle, 6.5-14 ms while
    it runs, on this machine); a worker process takes no GIL but shares the machine's cores, so
    the wait lasts while one is alive too (``search_workers``)."""
    import anyio

    start = time.perf_counter()
    if pid is None:
        return 0.0
    while time.perf_counter() - start < timeout_s:
        before = cpu_seconds(pid)
        await anyio.sleep(window_s)
        used = cpu_seconds(pid) - before
        if (math.isnan(used) or used < busy_share * window_s) and not search_workers(pid):
            break
    return time.perf_counter() - start


def search_workers(pid: int) -> list[int]:
    """The live children of ``pid`` that are search index workers (``search.worker``)."""
    found = []
    try:
        tasks = list(os.scandir(f"/proc/{pid}/task"))
    except OSError:
        return []
    for task in tasks:
        try:
            with open(f"{task.path}/children", encoding="ascii") as handle:
                children = [int(c) for c in handle.read().split()]
        except (OSError, ValueError):
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/cmdline", "rb") as handle:
                    if b"skill_mcp.search.worker" in handle.read():
                        found.append(child)
            except OSError:
                continue
    return found
