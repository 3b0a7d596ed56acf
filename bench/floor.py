"""The floor: the same SDK, one trivial tool, no catalog, served over stdio like ours.

Whatever this server costs (starting Python, importing the SDK, the handshake, one JSON-RPC
round trip) is the physical floor for any SDK-based server; every figure of ours is reported
as a ratio to it, measured in the same run.

    python -m bench.floor
"""

from __future__ import annotations

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


async def _serve() -> None:
    server: Server[Any] = Server("floor", on_list_tools=_list_tools, on_call_tool=_call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    anyio.run(_serve)


if __name__ == "__main__":
    main()
