"""An ``initialize`` the SDK refuses says what is wrong with it.

The SDK answers an ``initialize`` whose params do not validate with ``-32602`` and an empty
``data`` (it keeps pydantic's text off the wire). A hand-written handshake, such as the one
clients of the earlier ``skillmcp`` interface send (``{"protocolVersion": "2025-03-26"}``
without ``capabilities`` and ``clientInfo``), then learns nothing about what to add. This middleware keeps the code and
puts the fields in ``data``: ``reason`` (``invalid-initialize``), ``missing`` and ``invalid``
(dotted field paths under ``params``) and a one-line ``detail`` naming what a minimal
handshake carries.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from skill_mcp.reasons import Refusal

INVALID_PARAMS = -32602
MINIMAL = (
    'a minimal one is {"protocolVersion": "2025-11-25", "capabilities": {}, '
    '"clientInfo": {"name": "my-client", "version": "1.0"}}'
)


def describe_errors(errors: list[Any]) -> dict[str, Any]:
    """``data`` for a refused ``initialize``, from pydantic's error list (pure)."""
    missing: list[str] = []
    invalid: list[str] = []
    for err in errors:
        loc = [str(part) for part in err.get("loc", ())]
        path = ".".join(loc[1:] if loc[:1] == ["params"] else loc) or "params"
        (missing if err.get("type") == "missing" else invalid).append(path)
    parts = []
    if missing:
        parts.append("missing " + ", ".join(sorted(set(missing))))
    if invalid:
        parts.append("not valid: " + ", ".join(sorted(set(invalid))))
    summary = "initialize params are " + "; ".join(parts or ["not valid"])
    return {
        "reason": str(Refusal.INVALID_INITIALIZE),
        "missing": sorted(set(missing)),
        "invalid": sorted(set(invalid)),
        "summary": summary,
        "detail": f"{summary}; {MINIMAL}",
    }


def initialize_detail_middleware() -> Any:
    """Server middleware: a refused ``initialize`` keeps ``-32602`` and gains a useful ``data``."""

    async def middleware(ctx: Any, call_next: Any) -> Any:
        if ctx.method != "initialize":
            return await call_next(ctx)
        try:
            return await call_next(ctx)
        except ValidationError as err:
            data = describe_errors(list(err.errors()))
            summary = data.pop("summary")
            raise MCPError(code=INVALID_PARAMS, message=f"Invalid request parameters: {summary}", data=data) from None

    return middleware
