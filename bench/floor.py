"""The floor: the same SDK, one trivial tool, no catalog, served over stdio like ours.

Whatever this server costs (starting Python, importing the SDK, the handshake, one JSON-RPC
round trip) is the physical floor for any SDK-based server; every figure of ours is reported
as a ratio to it, measured in the same run.

    python -m bench.floor
    python -m bench.floor --skill-mcp-transport

With ``--skill-mcp-transport`` the same trivial server runs on skill-mcp's own stdio transport
(``skill_mcp.surfaces.stdio.run_stdio``: event-loop reads and writes) instead of the SDK's
``stdio_server``. The issue's floor is the plain one; this second floor separates what our
transport saves on every message from what the catalog costs per call.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = "ping"


async def _list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(
        name=TOOL, description="Answer pong.", input_schema={"type": "object", "properties": {}})])


async def _call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])


async def _serve(our_transport: bool) -> None:
    server: Server[Any] = Server("floor", on_list_tools=_list_tools, on_call_tool=_call_tool)
    if our_transport:
        from skill_mcp.surfaces.stdio import run_stdio

        await run_stdio(server)
        return
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    anyio.run(_serve, "--skill-mcp-transport" in sys.argv[1:])


if __name__ == "__main__":
    main()
