"""The one exception type the core raises for a refusal.

    SkillMcpError(reason: Refusal, detail: str, data: dict)
      - raised by catalog reads, the runner and the confirm layer;
      - mapped by ``surfaces`` to a tool error (``isError`` result whose structured content
        carries ``reason``) or to a JSON-RPC error, in one place.

Problems found while scanning are not exceptions: they are ``models.Problem`` records
collected into the catalog, because one bad skill must never cost the listing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skill_mcp.reasons import Refusal


class SkillMcpError(Exception):
    """A refused call. ``reason`` is stable; ``detail`` is prose for a person."""

    def __init__(self, reason: Refusal, detail: str, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.data: dict[str, Any] = dict(data or {})

    def to_dict(self) -> dict[str, Any]:
        return {"reason": str(self.reason), "detail": self.detail, **self.data}
