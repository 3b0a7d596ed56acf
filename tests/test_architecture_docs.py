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


# One entry of the "where" column: a file in backticks, then its symbols in parentheses. A
# symbol is a top-level name (def, class, assignment) or ``Class.member``; in an nftables file
# it is a ``define``, a table, a chain or a set.
ENTRY = re.compile(r"`(?P<path>[\w./-]+\.(?:py|nft))`(?:\s*\((?P<symbols>[^()]*)\))?")
SYMBOL = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)`")
NFT_NAME = re.compile(r"^\s*(?:define|chain|set|map|table\s+\w+)\s+(\w+)", re.MULTILINE)
Entry = tuple[str, tuple[str, ...]]


def where_things_live(text: str | None = None) -> list[tuple[str, list[Entry]]]:
    """``(rule, [(path, symbols)])`` for each row of the table; a symbol list that holds anything
    but backticked names and commas yields the sentinel symbol ``"?"``, which no file defines."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8") if text is None else text
    section = text[text.index("## Where things live") :]
    section = section[: section.index("\n## ", 1)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0] not in ("the rule", "---"):
            entries = []
            for m in ENTRY.finditer(cells[1]):
                listed = m.group("symbols") or ""
                symbols = tuple(SYMBOL.findall(listed))
                if SYMBOL.sub("", listed).replace(",", "").strip():
                    symbols += ("?",)
                entries.append((m.group("path"), symbols))
            rows.append((cells[0], entries))
    return rows


def _defined_in_python(tree: ast.Module) -> set[str]:
    names: set[str] = set()

    def bind(target: ast.expr, prefix: str) -> None:
        if isinstance(target, ast.Name):
            names.add(prefix + target.id)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                bind(element, prefix)

    def scan(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(prefix + node.name)
            elif isinstance(node, ast.ClassDef):
                names.add(prefix + node.name)
                if not prefix:
                    scan(node.body, node.name + ".")
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target, prefix)
            elif isinstance(node, ast.AnnAssign):
                bind(node.target, prefix)
            elif isinstance(node, ast.If | ast.Try) and not prefix:  # `if TYPE_CHECKING:`, `try: import`
                for block in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ()))):
                    scan(block, prefix)

    scan(tree.body, "")
    return names


def defined(path: Path) -> set[str]:
    """The names a file defines, as the table may cite them."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".nft":
        return set(NFT_NAME.findall(text))
    return _defined_in_python(ast.parse(text))


def undefined(rows: list[tuple[str, list[Entry]]], repo: Path = REPO) -> list[str]:
    """``path: symbol`` for each symbol the table names that its file does not define, and
    ``path: (no symbol)`` for a file named without one."""
    found = []
    for _rule, entries in rows:
        for path, symbols in entries:
            have = defined(repo / path) if (repo / path).is_file() else set()
            found += [f"{path}: {s}" for s in symbols if s not in have] or ([] if symbols else [f"{path}: (no symbol)"])
    return found


def test_where_things_live_names_at_least_eight_rules_each_with_a_module() -> None:
    rows = where_things_live()
    assert len(rows) >= 8
    assert [rule for rule, entries in rows if not entries] == []


def test_every_module_in_where_things_live_exists() -> None:
    missing = [path for _rule, entries in where_things_live() for path, _ in entries if not (REPO / path).is_file()]
    assert missing == []


def test_every_symbol_in_where_things_live_is_defined_in_its_file() -> None:
    rows = where_things_live()
    assert sum(len(symbols) for _rule, entries in rows for _path, symbols in entries) >= len(rows)
    assert undefined(rows) == []


def test_a_renamed_module_in_where_things_live_is_caught() -> None:
    # Positive control: the same check over a table naming a module that is gone finds it.
    table = "## Where things live\n\n| the rule | where |\n|---|---|\n| x | `src/skill_mcp/runner/environ.py` (`run_env`) |\n\n## Next\n"
    rows = where_things_live(table)
    assert rows == [("x", [("src/skill_mcp/runner/environ.py", ("run_env",))])]
    assert not (REPO / rows[0][1][0][0]).exists()
    assert undefined(rows) == ["src/skill_mcp/runner/environ.py: run_env"]


PLANTED = """## Where things live

| the rule | where |
|---|---|
| a real row | `src/skill_mcp/trees.py` (`remove_tree`, `NotRemoved`), `src/skill_mcp_launcher/policy.py` (`Grants.from_environ`) |
| a symbol that moved away | `src/skill_mcp/limits.py` (`remove_tree`) |
| a method the class lacks | `src/skill_mcp_launcher/policy.py` (`Grants.hosted`) |
| a file without its symbol | `src/skill_mcp/paths.py` |
| prose where the symbols go | `src/skill_mcp/config.py` (the settings) |
| a chain that is there, and one that is not | `nftables/skill-mcp.nft` (`output`, `SCRIPT_UID`, `forward`) |

## Next
"""


def test_a_planted_wrong_row_in_where_things_live_is_reported() -> None:
    # Negative control: each wrong entry of the planted table is reported, and only those; the
    # real row and the real chain and define (positive controls) are not.
    assert undefined(where_things_live(PLANTED)) == [
        "src/skill_mcp/limits.py: remove_tree",
        "src/skill_mcp_launcher/policy.py: Grants.hosted",
        "src/skill_mcp/paths.py: (no symbol)",
        "src/skill_mcp/config.py: ?",
        "nftables/skill-mcp.nft: forward",
    ]


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
