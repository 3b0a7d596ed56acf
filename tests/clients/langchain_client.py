"""langchain-mcp-adapters against skill-mcp over stdio, as its users start it: a new server per call.

    python langchain_client.py MARKER COMMAND [ARG...]

Run in the client venv (tests/clients/conftest.py), never imported. ``MultiServerMCPClient``'s
``get_tools`` tools open a session (so start a server) for every call, which is the adapters'
default. Lists, loads, reads, searches, reads a resource, and tries ``skill_run``'s token round
trip across two calls; prints what the model would be handed, as one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient


def _text(content: Any) -> str:
    """What a model is handed: the ToolMessage content, text blocks joined."""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)


async def main(marker: str, argv: list[str]) -> dict[str, Any]:
    client = MultiServerMCPClient(
        {
            "skills": {
                "command": argv[0],
                "args": argv[1:],
                "transport": "stdio",
                "env": {"SKILL_MCP_LOG": "warning", "PATH": "/usr/bin:/bin"},
            }
        }
    )
    tools = {t.name: t for t in await client.get_tools()}
    seen: dict[str, Any] = {"tools": sorted(tools)}

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        message = await tools[name].ainvoke({"type": "tool_call", "id": name, "name": name, "args": arguments})
        artifact = message.artifact or {}
        return {
            "text": _text(message.content),
            "status": message.status,
            "structured": artifact.get("structured_content") if isinstance(artifact, dict) else None,
        }

    seen["list"] = await call("skill_list", {})
    seen["load"] = await call("skill_load", {"name": "demo"})
    seen["file"] = await call("skill_file", {"name": "demo", "paths": ["scripts/echo.py"]})
    seen["search"] = await call("skill_search", {"query": "echo arguments as json"})
    blobs = await client.get_resources("skills", uris=["skill://demo/SKILL.md"])
    seen["resource"] = blobs[0].as_string()
    run = {"skill": "demo", "script": "scripts/echo.py", "args": [marker, "hi"]}
    seen["preview"] = await call("skill_run", run)
    token = (seen["preview"]["structured"] or {}).get("confirmToken")
    seen["confirm"] = await call("skill_run", {**run, "confirmToken": token})
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2:]))))
