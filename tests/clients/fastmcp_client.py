"""FastMCP's client against skill-mcp: run in the client venv (tests/clients/conftest.py), never imported.

    python fastmcp_client.py MARKER stdio COMMAND [ARG...]
    python fastmcp_client.py MARKER http URL TOKEN

Lists, loads, reads, searches and runs the demo skill through to its result (the confirmation
answered by FastMCP's elicitation handler), and prints what it saw as one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport


def _blocks(result: Any) -> list[dict[str, Any]]:
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]


async def main(marker: str, argv: list[str]) -> dict[str, Any]:
    if argv[0] == "stdio":
        transport: Any = StdioTransport(command=argv[1], args=argv[2:], env={"SKILL_MCP_LOG": "warning"})
    else:
        transport = StreamableHttpTransport(argv[1], auth=argv[2])
    prompts: list[str] = []

    async def confirm(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
        prompts.append(message)
        return {"confirm": True}

    seen: dict[str, Any] = {}
    async with Client(transport, elicitation_handler=confirm, timeout=60) as client:
        seen["tools"] = sorted(t.name for t in await client.list_tools())
        listed = await client.call_tool("skill_list", {})
        seen["list"] = listed.structured_content
        loaded = await client.call_tool("skill_load", {"name": "demo"})
        seen["load"] = {"structured": loaded.structured_content, "content": _blocks(loaded)}
        read = await client.call_tool("skill_file", {"name": "demo", "paths": ["scripts/echo.py"]})
        seen["file"] = {"structured": read.structured_content, "content": _blocks(read)}
        resource = await client.read_resource("skill://demo/SKILL.md")
        seen["resource"] = resource[0].text
        found = await client.call_tool("skill_search", {"query": "echo arguments as json"})
        seen["search"] = found.structured_content
        run = await client.call_tool(
            "skill_run", {"skill": "demo", "script": "scripts/echo.py", "args": [marker, "hi"]}, raise_on_error=False
        )
        seen["run"] = {"isError": run.is_error, "structured": run.structured_content}
    seen["prompts"] = prompts
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2:]))))
