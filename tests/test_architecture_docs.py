"""The maps a newcomer reads stay true: docs/architecture.md's "Where things live" table, the
module lists in the package docstrings, and the one spelling exception among the reasons."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from skill_mcp.reasons import ProblemReason, Refusal

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "skill_mcp"
KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
# Spelled as the original confirmation protocol spells them; see the comment above them in reasons.py.
UPPER_CASE_REASONS = {"DRAFT_CHANGED", "TOKEN_REUSED", "TOKEN_EXPIRED", "TOKEN_INVALID"}


def where_things_live(text: str | None = None) -> list[tuple[str, list[str]]]:
    """``(rule, [paths])`` for each row of the table."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8") if text is None else text
    section = text[text.index("## Where things live"):]
    section = section[:section.index("\n## ", 1)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0] not in ("the rule", "---"):
            rows.append((cells[0], re.findall(r"`([\w./]+\.py)`", cells[1])))
    return rows


def test_where_things_live_names_at_least_eight_rules_each_with_a_module() -> None:
    rows = where_things_live()
    assert len(rows) >= 8
    assert [rule for rule, paths in rows if not paths] == []


def test_every_module_in_where_things_live_exists() -> None:
    missing = [path for _rule, paths in where_things_live() for path in paths if not (REPO / path).is_file()]
    assert missing == []


def test_a_renamed_module_in_where_things_live_is_caught() -> None:
    # Positive control: the same check over a table naming a module that is gone finds it.
    table = "## Where things live\n\n| the rule | where |\n|---|---|\n| x | `src/skill_mcp/runner/environ.py` |\n\n## Next\n"
    rows = where_things_live(table)
    assert rows == [("x", ["src/skill_mcp/runner/environ.py"])] and not (REPO / rows[0][1][0]).exists()


def _listed_modules(package: Path) -> set[str]:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    return {m.group(1) for m in re.finditer(r"^\s{4}(\w+)/?\s", doc, re.MULTILINE)}


@pytest.mark.parametrize("package", ["surfaces", "surfaces/stdio", "surfaces/http", "runner", "search"])
def test_a_package_docstring_lists_exactly_its_modules(package: str) -> None:
    modules = {p.stem for p in (SRC / package).glob("*.py") if p.stem != "__init__"}
    modules |= {p.parent.name for p in (SRC / package).glob("*/__init__.py")}  # its subpackages
    assert modules  # positive control: the package has modules to list
    assert _listed_modules(SRC / package) == modules


def test_every_reason_is_kebab_case_but_the_confirmation_tokens() -> None:
    values = {r.value for r in (*ProblemReason, *Refusal)}
    assert {v for v in values if not KEBAB.fullmatch(v)} == UPPER_CASE_REASONS
    assert KEBAB.fullmatch("not-granted") and not KEBAB.fullmatch("TOKEN_INVALID")
