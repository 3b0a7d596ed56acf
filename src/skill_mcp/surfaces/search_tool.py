"""The ``skill_search`` tool: rank skills for the words a person would type.

The index is built lazily, on the first search against a catalog generation, so it adds
nothing to the server's cold start; a reload swaps the catalog, and the next search builds a
new index for it. The build runs in a worker thread so the event loop keeps answering other
requests meanwhile; a lock makes concurrent first searches share one build.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio

from skill_mcp.models import Catalog
from skill_mcp.search import MAX_LIMIT, SearchIndex, index_catalog, search_result
from skill_mcp.surfaces.registry import ToolCall, ToolSpec

NAME = "skill_search"
DEFAULT_LIMIT = 10
MAX_QUERY_CHARS = 1000

DESCRIPTION = (
    "Search the skills this server serves by what you want to do, in plain words (for example "
    "'fill in a pdf form'). Returns the best matches first, each with name, description, uri, score and a "
    "short reason naming the words and fields that matched. Then call skill_load with the name you pick."
)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                  "description": "what you want to do, in plain words"},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                  "description": f"at most this many hits (1-{MAX_LIMIT})"},
    },
    "required": ["query"],
    "additionalProperties": False,
}

_HIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "uri": {"type": "string"},
        "score": {"type": "number"},
        "reason": {"type": "string"},
        "matched": {"type": "array", "items": {"type": "string"}},
        "fields": {"type": "array", "items": {"type": "string"}},
        "section": {"type": "string"},
    },
    "required": ["name", "description", "uri", "score", "reason", "matched", "fields"],
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "hits": {"type": "array", "items": _HIT_SCHEMA},
        "count": {"type": "integer"},
        "searched": {"type": "integer", "description": "how many skills were searched"},
    },
    "required": ["query", "hits", "count", "searched"],
}


class SearchState:
    """The index for the catalog generation last searched. One per server, never global."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None
        self._index: SearchIndex | None = None

    def index_for(self, catalog: Catalog) -> SearchIndex:
        with self._lock:
            if self._catalog is not catalog or self._index is None:
                self._index = index_catalog(catalog)
                self._catalog = catalog
            return self._index


def search_tool_spec(state: SearchState | None = None) -> ToolSpec:
    state = state or SearchState()

    async def handler(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
        catalog = call.catalog
        index = await anyio.to_thread.run_sync(state.index_for, catalog)
        return search_result(catalog, index, str(args["query"]), int(args.get("limit", DEFAULT_LIMIT)))

    return ToolSpec(
        name=NAME,
        title="Search skills",
        description=DESCRIPTION,
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
        handler=handler,
        annotations={"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                     "openWorldHint": False},
    )
