"""The floor: the same SDK, one trivial tool, no catalog, served over stdio like ours.

Whatever this server costs (starting Python, importing the SDK, the handshake, one JSON-RPC
round trip) is the physical floor for any SDK-based server; every figure of ours is reported
as a ratio to it, measured in the same run.

    python -m bench.floor
    python -m bench.floor --skill-mcp-transport
    python -m bench.floor --replay ANSWERS.json

With ``--skill-mcp-transport`` the same trivial server runs on skill-mcp's own stdio transport
(``skill_mcp.surfaces.stdio.transport.run_stdio``: event-loop reads and writes) instead of the SDK's
``stdio_server``. The targets' floor is the plain one; this second floor separates what our
transport saves on every message from what the catalog costs per call.

With ``--replay FILE`` it is the same-size floor (``bench.fair``): it advertises the tools our
server advertised and answers each request with the answer our server gave to the identical
request, recorded beforehand (``tools/call`` and ``resources/read`` as the SDK's result models,
built at load time; ``skills/list`` and ``skills/get`` as the plain dicts our handlers return).
Its per-call cost is the SDK's for a payload of exactly our size and shape, and nothing else: a
dictionary look-up stands where our catalog works.

    python -m bench.floor --replay ANSWERS.json --load-time FILE

With ``--load-time FILE`` it writes to FILE how long reading and validating the recorded answers
took (seconds, before the handshake is served), and freezes what it loaded out of the cyclic
collector's passes. ``bench.firstanswer`` subtracts that time from the floor's ready: the floor it
needs is one that holds our pages in memory already, as a server with a warm catalog would.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, ConfigDict

TOOL = "ping"


async def _list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[types.Tool(name=TOOL, description="Answer pong.", input_schema={"type": "object", "properties": {}})]
    )


async def _call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])


class AnyParams(types.RequestParams):
    """Whatever a recorded request carried (``skills/list``'s cursor, ``skills/get``'s uri)."""

    model_config = ConfigDict(extra="allow")


# The SDK's result model per method, where our server answers with one (the others are dicts).
MODELS: dict[str, type[BaseModel]] = {
    "tools/call": types.CallToolResult,
    "resources/read": types.ReadResourceResult,
    "tools/list": types.ListToolsResult,
}
PARAMS: dict[str, type[types.RequestParams]] = {
    "tools/call": types.CallToolRequestParams,
    "resources/read": types.ReadResourceRequestParams,
    "tools/list": types.PaginatedRequestParams,
}


def request_key(method: str, params: dict[str, Any]) -> str:
    """One recorded request, whatever side computes it: the method and its params, ``_meta`` and
    absent values left out, keys sorted."""
    kept = {k: v for k, v in params.items() if v is not None and k != "_meta"}
    return json.dumps([method, kept], sort_keys=True, separators=(",", ":"))


def _replayer(path: Path) -> Server[Any]:
    recorded = json.loads(path.read_text(encoding="utf-8"))
    answers: dict[str, Any] = {}
    for method, params, result in recorded["answers"]:
        model = MODELS.get(method)
        answers[request_key(method, params)] = model.model_validate(result) if model else result
    server: Server[Any] = Server("floor-replay")

    def handler(method: str) -> Any:
        async def answer(ctx: Any, params: types.RequestParams) -> Any:
            key = request_key(method, params.model_dump(mode="json", by_alias=True, exclude_none=True))
            return answers[key]  # a request nobody recorded is a harness bug: let it fail loudly

        return answer

    for method in sorted({m for m, _, _ in recorded["answers"]}):
        server.add_request_handler(method, PARAMS.get(method, AnyParams), handler(method))
    return server


async def _serve(our_transport: bool, replay: Path | None = None, load_time: Path | None = None) -> None:
    start = time.perf_counter()
    server: Server[Any] = (
        Server("floor", on_list_tools=_list_tools, on_call_tool=_call_tool) if replay is None else _replayer(replay)
    )
    if load_time is not None:
        gc.freeze()
        load_time.write_text(f"{time.perf_counter() - start:.6f}\n", encoding="ascii")
    if our_transport:
        from skill_mcp.surfaces.stdio.transport import run_stdio

        await run_stdio(server)
        return
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    argv = sys.argv[1:]
    replay = Path(argv[argv.index("--replay") + 1]) if "--replay" in argv else None
    load_time = Path(argv[argv.index("--load-time") + 1]) if "--load-time" in argv else None
    anyio.run(_serve, "--skill-mcp-transport" in argv, replay, load_time)


if __name__ == "__main__":
    main()
