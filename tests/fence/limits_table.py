"""docs/fence.md's limits table, read into rows: what the limits-doc test and the declaration
bounds test both compare with the code."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "fence.md"
HEADING = "## Limits at a glance: standalone and appliance"


def documented_table(text: str | None = None) -> dict[str, tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8") if text is None else text
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ", 1)]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("limit", "---"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows
