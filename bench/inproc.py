"""Server-side figures taken in-process: catalog scan, search index build, search query time.

``skill_search``'s target is in server time (what the handler costs, without the pipe and the
client), so the query is timed here, on the same corpus, through the same code the tool runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings


@dataclass(slots=True)
class InProc:
    scan_s: float = float("nan")
    index_build_s: float = float("nan")
    search: list[float] = field(default_factory=list)
    via: str = ""


def measure(root: Path | None, queries: tuple[str, ...], calls: int) -> InProc:
    out = InProc()
    settings = load_settings([str(root)] if root is not None else [], {})
    start = time.perf_counter()
    catalog = build_catalog(settings)
    out.scan_s = time.perf_counter() - start
    try:
        from skill_mcp.search.source import index_catalog
    except ImportError:
        return out
    start = time.perf_counter()
    index: Any = index_catalog(catalog)
    out.index_build_s = time.perf_counter() - start
    out.via = "SearchIndex.search (the ranking skill_search runs)"
    for i in range(calls):
        query = queries[i % len(queries)]
        start = time.perf_counter()
        index.search(query, 10)
        out.search.append(time.perf_counter() - start)
    return out
