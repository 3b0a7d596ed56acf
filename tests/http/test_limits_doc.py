"""docs/http.md's table of connection limits says what ``ConnectionLimits`` holds, row by row."""

from __future__ import annotations

from pathlib import Path

from skill_mcp.surfaces.http.conn import DEFAULT_LIMITS, ConnectionLimits

DOC = Path(__file__).resolve().parents[2] / "docs" / "http.md"


def documented(text: str | None = None) -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8") if text is None else text
    table = text[text.index("<!-- http-limits:begin -->") : text.index("<!-- http-limits:end -->")]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("limit", "---"):
            rows[cells[0]] = cells[1]
    return rows


def expected(limits: ConnectionLimits = DEFAULT_LIMITS) -> dict[str, str]:
    return {
        "request head deadline": f"{limits.head_timeout_s:g} s",
        "request head size": f"{limits.max_head_bytes // 1024} KiB",
        "idle keep-alive": f"{limits.keep_alive_s} s",
        "write stall (nothing written is taken)": f"{limits.write_stall_s:g} s",
        "connections per address (IPv6: per /64)": str(limits.max_per_peer),
        "connections in all": str(limits.max_connections),
        "requests in flight": str(limits.max_in_flight),
    }


def test_docs_connection_limits_table_matches_the_code() -> None:
    assert documented() == expected()


def test_a_changed_number_in_the_table_is_caught() -> None:
    text = DOC.read_text(encoding="utf-8").replace("| requests in flight | 128 |", "| requests in flight | 129 |")
    assert documented(text) != expected()
