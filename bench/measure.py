"""The measurements. Each takes server specs and returns raw samples in seconds (or KiB).

Interleaving: every repetition visits every server before the next repetition starts, and
per-call figures alternate one floor call with one call of ours, so a slow moment of this
shared machine lands on both sides rather than on one.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp_types as types
from pydantic import TypeAdapter

from bench.floor import TOOL as FLOOR_TOOL
from bench.servers import CALL_TIMEOUT_S, ServerSpec, peak_rss_kib, session, whole
from skill_mcp.runner.interpreters import FIXED_PATH

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
    page: dict[str, Any] = await client.session.send_request(req, _RAW)
    return page


async def skills_get(client: Any, uri: str) -> dict[str, Any]:
    entry: dict[str, Any] = await client.session.send_request(SkillsGetRequest(params=_UriParams(uri=uri)), _RAW)
    return entry


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
        order = list(specs[rep % len(specs) :]) + list(specs[: rep % len(specs)])
        for spec in order:
            async with session(spec) as s:
                await s.client.list_tools()
                done = time.perf_counter()
                out[spec.label].initialize.append(s.initialized_at - s.spawned_at)
                out[spec.label].ready.append(done - s.spawned_at)
    return out


async def peak_memory(spec: ServerSpec, first_call: Op) -> int:
    """VmHWM (KiB) of the server after its first call of ``first_call``, once it is whole
    (``servers.whole``)."""
    async with session(spec) as s:
        if s.pid is None:
            raise RuntimeError("the server process was not found among this process's children")
        await first_call(s.client, 0)
        await whole(s.client)
        return peak_rss_kib(s.pid)


async def alternate(
    floor_clients: Sequence[Any],
    ours_client: Any,
    op: Op,
    calls: int,
    warmup: int = 5,
    same_op_clients: Sequence[Any] = (),
) -> tuple[list[list[float]], list[float]]:
    """Visit each floor (its trivial call), each of ``same_op_clients`` (``op`` itself: the
    same-size floors of ``bench.fair``) and ours (``op``) once per round, ``calls`` rounds,
    rotating who goes first; return each floor's samples (trivial floors first) and ours."""
    firsts = [(floor_call, c) for c in floor_clients] + [(op, c) for c in same_op_clients]
    for i in range(warmup):
        for fn, client in firsts:
            await fn(client, i)
        await op(ours_client, i)
    floors: list[list[float]] = [[] for _ in firsts]
    ours: list[float] = []
    visits = [*((fn, c, sink) for (fn, c), sink in zip(firsts, floors, strict=True)), (op, ours_client, ours)]
    for i in range(calls):
        shift = i % len(visits)
        for fn, client, sink in visits[shift:] + visits[:shift]:
            start = time.perf_counter()
            await fn(client, i)
            sink.append(time.perf_counter() - start)
    return floors, ours


@dataclass(frozen=True, slots=True)
class FenceShape:
    """How the fence runs a script, from its preview: what a fair direct spawn must copy.

    The same binary and script path (``willRun.argv``), the same cwd, and an environment of the
    same names with the values the server was started with (the SDK's default environment plus
    the spec's). The harness's own environment must not leak in: it may hold variables that
    change an interpreter's start-up (``NODE_EXTRA_CA_CERTS`` makes node parse a CA bundle,
    40-80 ms here), which the fence never hands a script. ``TMPDIR`` points at an existing
    directory: the fence's private per-run directory is part of what skill_run costs.
    """

    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str]

    @classmethod
    def of(cls, will_run: dict[str, Any], server_env: dict[str, str]) -> FenceShape:
        env: dict[str, str] = {}
        for entry in will_run["env"]:
            name = entry["name"]
            if name == "TMPDIR":
                env[name] = tempfile.gettempdir()
            elif name == "PATH":
                env[name] = server_env.get("PATH") or FIXED_PATH
            elif name in server_env:
                env[name] = server_env[name]
        return cls(tuple(will_run["argv"]), will_run["cwd"], env)


def direct_spawn_once(shape: FenceShape) -> float:
    """One spawn of the interpreter on the script from Python: the figure skill_run is held to."""
    start = time.perf_counter()
    subprocess.run(
        list(shape.argv),
        cwd=shape.cwd,
        env=shape.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=CALL_TIMEOUT_S,
        check=True,
    )
    return time.perf_counter() - start


async def preview(client: Any, args: dict[str, Any]) -> dict[str, Any]:
    """The first call of the token round trip (never timed)."""
    first = structured(await client.call_tool("skill_run", args))
    if not first.get("confirmToken"):
        raise RuntimeError(f"skill_run gave no confirmToken: status {first.get('status')!r}")
    return first


async def confirmed_run(client: Any, args: dict[str, Any]) -> float:
    """The token round trip; only the second call (the run) is timed, sent as soon as the first returns."""
    token = (await preview(client, args))["confirmToken"]
    start = time.perf_counter()
    second = structured(await client.call_tool("skill_run", {**args, "confirmToken": token}))
    elapsed = time.perf_counter() - start
    if second.get("exitCode") != 0:
        raise RuntimeError(f"the no-op script did not exit 0: {second.get('status')!r} {second.get('stderr')!r}")
    return elapsed


@dataclass(slots=True)
class RunSamples:
    direct: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)  # interleaved with the direct spawns
    back_to_back: list[float] = field(default_factory=list)  # runs with nothing else in between
    paced: list[float] = field(default_factory=list)  # runs after a pause, as a client that thinks


async def paired_runs(
    client: Any,
    args: dict[str, Any],
    server_env: dict[str, str],
    runs: int,
    back_to_back: int = 0,
    paced: int = 0,
    pause_s: float = 0.05,
    warmup: int = 2,
) -> RunSamples:
    """``runs`` direct spawns interleaved with ``runs`` confirmed skill_runs, alternating which goes first.

    Each skill_run's confirmation follows its preview at once (the worst case for anything
    prepared at preview time). Then ``back_to_back`` runs with no direct spawn between them: the
    next run's preview comes as soon as the previous result is in. Then ``paced`` runs, each
    preview ``pause_s`` after the previous result (a client, or a person, between two calls).
    """
    shape = FenceShape.of((await preview(client, args))["preview"]["willRun"], server_env)
    for _ in range(warmup):
        direct_spawn_once(shape)
        await confirmed_run(client, args)
    out = RunSamples()
    for i in range(runs):
        if i % 2 == 0:
            out.direct.append(direct_spawn_once(shape))
            out.ours.append(await confirmed_run(client, args))
        else:
            out.ours.append(await confirmed_run(client, args))
            out.direct.append(direct_spawn_once(shape))
    for _ in range(back_to_back):
        out.back_to_back.append(await confirmed_run(client, args))
    for _ in range(paced):
        await anyio.sleep(pause_s)
        out.paced.append(await confirmed_run(client, args))
    return out
