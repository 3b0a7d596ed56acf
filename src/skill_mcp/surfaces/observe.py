"""The request middleware that records every MCP request for ``skill_mcp.telemetry``.

It replaces the SDK's own ``OpenTelemetryMiddleware`` (which uses the process-global tracer and
records neither metrics nor our refusal reasons) and follows the MCP semantic conventions:

* a SERVER span named ``{mcp.method.name} {target}``, the target being the tool or prompt
  name, and only a name this server serves (an unknown tool is client input, not a name);
* attributes ``mcp.method.name``, ``mcp.protocol.version``, ``mcp.session.id``,
  ``jsonrpc.request.id``, ``mcp.resource.uri`` (once answered: a refused URI is client input),
  ``gen_ai.tool.name`` and
  ``gen_ai.operation.name`` (``execute_tool``), ``gen_ai.prompt.name``, ``network.transport``;
* the caller's trace continued from ``params._meta`` (``traceparent``/``tracestate``);
* a JSON-RPC error sets ``rpc.response.status_code`` and ``error.type`` (the code), and the
  span status ERROR only for the codes the conventions call server errors (-32603, -32000 to
  -32099); a tool result with ``isError: true`` is ``error.type=tool_error`` with status ERROR;
  either carries ``skill_mcp.reason`` when the refusal has one, and counts a refusal;
* ``mcp.server.operation.duration`` by method, tool, error type and status code.

Never recorded: tool arguments, prompt arguments, results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

if TYPE_CHECKING:  # pragma: no cover - typing only: a server without telemetry never imports it
    from skill_mcp.telemetry import Telemetry

URI_METHODS = frozenset(
    {"resources/read", "resources/subscribe", "resources/unsubscribe", "skills/get", "resources/directory/read"}
)
METRIC_KEYS = (
    "mcp.method.name",
    "gen_ai.tool.name",
    "gen_ai.operation.name",
    "mcp.protocol.version",
    "network.transport",
)


def _server_error(code: int) -> bool:
    return code == types.INTERNAL_ERROR or -32099 <= code <= -32000


def _reason(data: Any) -> str | None:
    reason = data.get("reason") if isinstance(data, Mapping) else None
    return reason if isinstance(reason, str) and len(reason) <= 64 else None


def _tool_error(result: Any) -> tuple[bool, str | None]:
    if isinstance(result, types.CallToolResult):
        return bool(result.is_error), _reason(result.structured_content) if result.is_error else None
    if isinstance(result, Mapping) and result.get("isError") is True:
        return True, _reason(result.get("structuredContent"))
    return False, None


def _session_id(ctx: Any) -> str | None:
    session = getattr(ctx, "session", None)
    sid = getattr(session, "session_id", None) or getattr(ctx, "session_id", None)
    return sid if isinstance(sid, str) else None


def observe_middleware(telemetry: Telemetry, tool_names: Iterable[str], *, transport: str) -> Any:
    """The middleware for one server; ``transport`` is ``pipe`` (stdio) or ``tcp`` (HTTP)."""
    tools = frozenset(tool_names)
    network = {"network.transport": transport, **({"network.protocol.name": "http"} if transport == "tcp" else {})}

    async def middleware(ctx: Any, call_next: Any) -> Any:
        method = ctx.method
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        name = params.get("name")
        attrs: dict[str, Any] = {"mcp.method.name": method, "mcp.protocol.version": ctx.protocol_version, **network}
        target = None
        if method == "tools/call":
            attrs["gen_ai.operation.name"] = "execute_tool"
            if isinstance(name, str) and name in tools:
                target = attrs["gen_ai.tool.name"] = name
        if ctx.request_id is not None:
            attrs["jsonrpc.request.id"] = str(ctx.request_id)
        sid = _session_id(ctx)
        if sid is not None:
            attrs["mcp.session.id"] = sid
        uri = params.get("uri")
        served_uri = uri if method in URI_METHODS and isinstance(uri, str) and len(uri) <= 2048 else None
        meta = ctx.meta if isinstance(ctx.meta, Mapping) else params.get("_meta")
        span_name = f"{method} {target}" if target else method
        with telemetry.server_span(span_name, attrs, telemetry.parent_from(meta), METRIC_KEYS) as outcome:
            try:
                result = await call_next(ctx)
            except MCPError as exc:
                code = exc.error.code
                outcome.attributes["rpc.response.status_code"] = str(code)
                outcome.error_type = str(code)
                outcome.is_error = _server_error(code)
                outcome.error_message = exc.error.message if outcome.is_error else None
                reason = _reason(exc.error.data)
                if reason is not None:
                    outcome.attributes["skill_mcp.reason"] = reason
                    telemetry.count_refusal(reason, {"mcp.method.name": method, **_tool(attrs)})
                raise
            except ValidationError:
                invalid = str(types.INVALID_PARAMS)  # pydantic's messages carry client input: never recorded
                outcome.attributes["rpc.response.status_code"] = invalid
                outcome.error_type = invalid
                raise
            failed, reason = _tool_error(result) if method == "tools/call" else (False, None)
            if failed:
                outcome.error_type = "tool_error"
                outcome.is_error = True
                outcome.error_message = reason
                if reason is not None:
                    outcome.attributes["skill_mcp.reason"] = reason
                    telemetry.count_refusal(reason, {"mcp.method.name": method, **_tool(attrs)})
            if served_uri is not None:
                # Answered, so the URI names something served (a refused one is client input).
                outcome.attributes["mcp.resource.uri"] = served_uri
            if method == "prompts/get" and isinstance(name, str):
                # Answered, so the name is a prompt this server serves (a low-cardinality target).
                outcome.attributes["gen_ai.prompt.name"] = name
                outcome.name = f"{method} {name}"
            return result

    return middleware


def _tool(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {"gen_ai.tool.name": attrs["gen_ai.tool.name"]} if "gen_ai.tool.name" in attrs else {}


def install(server: Any, telemetry: Telemetry, tool_names: Iterable[str], *, transport: str) -> None:
    """Put ours in place of the SDK's span middleware (which would record each request twice)."""
    from mcp.server._otel import OpenTelemetryMiddleware

    server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    server.middleware.insert(0, observe_middleware(telemetry, tool_names, transport=transport))


def remove_sdk_spans(server: Any) -> None:
    """Telemetry off: drop the SDK's span middleware too, so a call pays for no span at all."""
    from mcp.server._otel import OpenTelemetryMiddleware

    server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
