"""docs/fence.md's limits table says what ``skill_mcp.limits`` holds, row by row, for both modes."""

from __future__ import annotations

import resource
from pathlib import Path

from skill_mcp import limits

DOC = Path(__file__).resolve().parents[2] / "docs" / "fence.md"


def documented_table() -> dict[str, tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Limits: one table, two modes"):]
    section = section[:section.index("\n## ", 1)]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("limit", "---"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_docs_limits_table_matches_the_shared_module() -> None:
    assert documented_table() == limits.limits_table()


def test_the_table_reads_the_values_both_sides_apply() -> None:
    # Positive control for the comparison above: the module's table is built from the very
    # Limits objects the spawners use, so a changed limit changes a row.
    appliance = dict(limits.APPLIANCE.pairs())
    assert appliance[resource.RLIMIT_NPROC] == 64 and limits.limits_table()["RLIMIT_NPROC"][1] == "64"
    changed = limits.Limits(nproc=65, nofile=256, fsize=1, address_space=None)
    assert dict(changed.pairs())[resource.RLIMIT_NPROC] == 65 and resource.RLIMIT_AS not in dict(changed.pairs())


def test_standalone_and_broker_share_one_interpreter_set_and_capture_bound() -> None:
    from skill_mcp.runner import interpreters, types
    from skill_mcp_launcher import sandbox

    assert interpreters.CANDIDATES is limits.CANDIDATES and types.CAPTURE_LIMIT == limits.CAPTURE_LIMIT
    assert sandbox.Capture is limits.Capture and sandbox.Limits is limits.Limits
