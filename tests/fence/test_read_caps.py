"""The read caps are one table: docs/architecture.md says what ``limits.READ_CAPS`` holds, and
each reader's constant is the table's field, not a number of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from skill_mcp import declwire, limits, outputs, validate
from skill_mcp.catalog import frontmatter, packs, skill, walk
from skill_mcp.runner import plan
from skill_mcp.surfaces import answer_bytes, read_tools, resources

REPO = Path(__file__).resolve().parents[2]
HEADING = "## Read caps"


def documented() -> dict[str, tuple[str, str]]:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ", 1)]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 3:
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def test_the_documented_read_caps_are_the_codes() -> None:
    assert documented() == limits.READ_CAPS.table()


def test_every_read_cap_says_why() -> None:
    fields = set(limits.ReadCaps.__dataclass_fields__)
    assert set(limits.READ_CAPS.why()) == fields  # no cap without its reason, no reason without a cap


@pytest.mark.parametrize(
    ("constant", "field"),
    [
        (skill.SKILL_MD_MAX_BYTES, "skill_md"),
        (frontmatter.FRONTMATTER_MAX_BYTES, "frontmatter"),
        (read_tools.MAX_FILE_BYTES, "file_by_tool"),
        (read_tools.MAX_BATCH_BYTES, "batch_by_tool"),
        (resources.MAX_READ_BYTES, "file_by_resource"),
        (walk.MAX_TOTAL_BYTES, "skill_total"),
        (plan.MAX_SCRIPT_BYTES, "script"),
        (packs.PACK_JSON_MAX_BYTES, "pack_json"),
        (validate.SCAN_MAX_BYTES, "credential_scan"),
        (limits.CAPTURE_LIMIT, "capture"),
        (outputs.MAX_OUTPUT_BYTES, "run_outputs"),
        (declwire.MAX_DOCUMENT, "declarations"),
        (answer_bytes.LIMIT, "answers_at_once"),
    ],
)
def test_each_reader_uses_the_table(constant: int, field: str) -> None:
    assert constant == getattr(limits.READ_CAPS, field)


def test_no_reader_spells_a_mebibyte_of_its_own() -> None:
    # The modules whose caps the table holds name no ``1024 * 1024`` of their own any more.
    readers = (
        "catalog/skill.py",
        "catalog/frontmatter.py",
        "catalog/files.py",
        "catalog/walk.py",
        "catalog/packs.py",
        "search/source.py",
        "validate.py",
        "surfaces/read_tools.py",
        "surfaces/resources.py",
        "runner/plan.py",
        "outputs.py",
        "declwire.py",
    )
    texts = {r: (REPO / "src/skill_mcp" / r).read_text(encoding="utf-8") for r in readers}
    assert all("READ_CAPS" in t for t in texts.values())  # positive control: each reads the table
    assert [r for r, t in texts.items() if "1024 * 1024" in t] == []
