"""Confirmation tokens are minted only through the runner (``Runner.confirmation_token``).

A token is what lets a script run: a surface that minted one itself could bind it to a plan
the runner never prepared. Every module of ``src`` outside ``skill_mcp/runner/`` is parsed with
``ast``; none may import ``skill_mcp.runner.tokens`` (where ``TokenBook.mint`` lives), name
``TokenBook``, or call ``.tokens.mint`` on a runner it holds.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
TOKENS = "skill_mcp.runner.tokens"


def _findings(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"imports {a.name}" for a in node.names if a.name == TOKENS or a.name.startswith(TOKENS + ".")]
        elif isinstance(node, ast.ImportFrom) and node.module == TOKENS:
            found.append(f"imports {TOKENS}")
        elif isinstance(node, ast.ImportFrom) and node.module == "skill_mcp.runner":
            found += [f"imports {TOKENS}" for a in node.names if a.name == "tokens"]
        elif isinstance(node, ast.Name) and node.id == "TokenBook":
            found.append("names TokenBook")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "mint"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "tokens"
        ):
            found.append("calls .tokens.mint")
    return found


def minting_outside_runner(src_root: Path, *, skip_runner: bool = True) -> list[str]:
    bad: list[str] = []
    for path in sorted(src_root.rglob("*.py")):
        rel = path.relative_to(src_root)
        if rel.parts[0] not in ("skill_mcp", "skill_mcp_launcher"):
            continue
        if skip_runner and rel.parts[:2] == ("skill_mcp", "runner"):
            continue
        bad += [f"{rel.as_posix()}: {what}" for what in _findings(ast.parse(path.read_text(encoding="utf-8")))]
    return sorted(set(bad))


def test_no_module_outside_the_runner_mints_a_token() -> None:
    assert minting_outside_runner(SRC) == []


def test_the_runner_itself_is_seen_minting() -> None:
    # Positive control on the real tree: without the runner's exemption the scan finds the one
    # place that mints (and the book it holds), so the check above reads the right code.
    found = minting_outside_runner(SRC, skip_runner=False)
    assert "skill_mcp/runner/core.py: calls .tokens.mint" in found
    assert all(line.startswith("skill_mcp/runner/") for line in found)


def test_a_surface_minting_its_own_token_is_reported(tmp_path: Path) -> None:
    # Positive control on a planted tree: each way round the runner is reported; the same code
    # inside the runner, and a call of the runner's own method, are not.
    plants = {
        "skill_mcp/surfaces/run_tool.py": "def f(self, p):\n    return self.runner.tokens.mint(p.canonical())\n",
        "skill_mcp/surfaces/other.py": "from skill_mcp.runner.tokens import TokenBook\nbook = TokenBook()\n",
        "skill_mcp/server.py": "from skill_mcp.runner import tokens\nimport skill_mcp.runner.tokens\n",
        "skill_mcp/surfaces/good.py": "def f(self, p):\n    return self.runner.confirmation_token(p)\n",
        "skill_mcp/runner/core.py": "from skill_mcp.runner.tokens import TokenBook\nx = r.tokens.mint(b'')\n",
    }
    for rel, text in plants.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    assert minting_outside_runner(tmp_path) == [
        "skill_mcp/server.py: imports skill_mcp.runner.tokens",
        "skill_mcp/surfaces/other.py: imports skill_mcp.runner.tokens",
        "skill_mcp/surfaces/other.py: names TokenBook",
        "skill_mcp/surfaces/run_tool.py: calls .tokens.mint",
    ]
