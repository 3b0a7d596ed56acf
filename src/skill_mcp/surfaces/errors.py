"""The one place a refusal becomes a protocol shape.

Two planes:

* a tool call that is refused is still a *successful* JSON-RPC exchange: the result has
  ``isError: true`` and ``structuredContent`` ``{reason, detail, ...}``, so the model can read
  the reason and act on it (fix a path, split a batch, ask the user);
* a protocol method (``resources/read``, ``prompts/get``, ``skills/get``,
  ``resources/directory/read``) that names something the server does not serve is a JSON-RPC
  error ``-32602`` whose ``data`` carries the same ``{reason, detail}``.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal


def tool_error(err: SkillMcpError) -> types.CallToolResult:
    payload = err.to_dict()
    text = f"{err.reason}: {err.detail}\n{json.dumps(payload, ensure_ascii=False)}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=payload,
        is_error=True,
    )


def invalid_params(err: SkillMcpError) -> MCPError:
    """``-32602`` carrying the refusal; the message names the cause for a person."""
    return MCPError(code=types.INVALID_PARAMS, message=err.detail, data=err.to_dict())


def unknown_uri(uri: str, detail: str | None = None, **data: Any) -> MCPError:
    err = SkillMcpError(Refusal.UNKNOWN_URI, detail or f"no resource is served at {uri}", {"uri": uri, **data})
    return invalid_params(err)
