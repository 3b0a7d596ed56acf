"""Imports point one way: down the layers that docs/architecture.md draws.

The layers are read from the block between ``<!-- layers:begin -->`` and ``<!-- layers:end -->``
in docs/architecture.md, so the picture and this check cannot drift apart. Every ``import`` in
``src`` (``TYPE_CHECKING`` and function-local ones included: a late import is still a
dependency) is parsed with ``ast``; a module may import its own unit, any unit of a lower row,
and, in row 0 only, the other leaves. The launcher may import row 0 and itself; nothing in
``skill_mcp`` may import the launcher.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
LAUNCHER = "launcher"


def _layers(doc: str) -> dict[str, tuple[int, int]]:
    """unit -> (row, group within the row); units of one group may import each other."""
    block = doc.split("<!-- layers:begin -->", 1)[1].split("<!-- layers:end -->", 1)[0]
    ranks: dict[str, tuple[int, int]] = {}
    for line in block.splitlines():
        row = re.match(r"^(\d+)\s+(.+?)(?:\s{2,}.*)?$", line)
        if not row:
            continue
        for group, names in enumerate(row.group(2).split("|")):
            for name in names.split(","):
                ranks[name.strip()] = (int(row.group(1)), group)
    return ranks


def _unit(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "skill_mcp_launcher":
        return LAUNCHER
    return "__init__" if len(parts) == 1 else parts[1]


def _imports(tree: ast.AST, here: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from skill_mcp import brokerwire` imports the module skill_mcp.brokerwire.
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{here}: relative import; the project spells imports absolutely")
    return {name for name in found if name.split(".")[0] in ("skill_mcp", "skill_mcp_launcher")}


def _allowed(src: str, dst: str, ranks: dict[str, tuple[int, int]]) -> bool:
    if src == dst or dst == "__init__":
        return True  # the package itself holds only __version__ and imports nothing
    if dst not in ranks and dst != LAUNCHER:
        return True  # `from skill_mcp import x` where x is a name, not a unit: x's own unit is checked
    if src == LAUNCHER:
        return ranks[dst][0] == 0
    if dst == LAUNCHER:
        return False
    (src_row, src_group), (dst_row, dst_group) = ranks[src], ranks[dst]
    return dst_row < src_row or (dst_row == src_row == 0) or (dst_row == src_row and dst_group == src_group)


def violations(src_root: Path, ranks: dict[str, tuple[int, int]]) -> list[str]:
    bad: list[str] = []
    for path in sorted(src_root.rglob("*.py")):
        rel = path.relative_to(src_root).with_suffix("")
        if rel.parts[0] not in ("skill_mcp", "skill_mcp_launcher") or "bundled" in rel.parts:
            continue
        module = ".".join(rel.parts).removesuffix(".__init__")
        src = _unit(module)
        assert src == LAUNCHER or src in ranks, f"{module}: unit {src!r} is in no layer of docs/architecture.md"
        for name in sorted(_imports(ast.parse(path.read_text(encoding="utf-8")), module)):
            if not _allowed(src, _unit(name), ranks):
                bad.append(f"{module} imports {name} ({src} -> {_unit(name)})")
    return bad


def _ranks() -> dict[str, tuple[int, int]]:
    return _layers((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))


def test_every_import_points_down_the_documented_layers() -> None:
    ranks = _ranks()
    # Positive control: the picture was read, and it has the layers this check leans on.
    assert ranks["surfaces"][0] > ranks["runner"][0] > ranks["catalog"][0] > ranks["reasons"][0] == 0
    assert ranks["server"][0] > ranks["surfaces"][0]
    assert violations(SRC, ranks) == []


def test_an_upward_import_is_reported(tmp_path: Path) -> None:
    # The same check over a planted tree: a leaf importing the runner, the runner importing
    # surfaces, two siblings of one row, the server package importing the launcher, and the
    # launcher importing the catalog are each reported; a downward import is not.
    plants = {
        "skill_mcp/reasons.py": "from skill_mcp.runner import plan\n",
        "skill_mcp/runner/plan.py": "def f():\n    from skill_mcp.surfaces import app\n",
        "skill_mcp/search/index.py": "import skill_mcp.runner.plan\nfrom skill_mcp.catalog import files\n",
        "skill_mcp/runner/spawn_broker.py": "from skill_mcp_launcher import boot\n",
        "skill_mcp_launcher/boot.py": "from skill_mcp.catalog import discover\nfrom skill_mcp import brokerwire\n",
    }
    for rel, text in plants.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    found = violations(tmp_path, _ranks())
    assert found == [
        "skill_mcp.reasons imports skill_mcp.runner (reasons -> runner)",
        "skill_mcp.reasons imports skill_mcp.runner.plan (reasons -> runner)",
        "skill_mcp.runner.plan imports skill_mcp.surfaces (runner -> surfaces)",
        "skill_mcp.runner.plan imports skill_mcp.surfaces.app (runner -> surfaces)",
        "skill_mcp.runner.spawn_broker imports skill_mcp_launcher (runner -> launcher)",
        "skill_mcp.runner.spawn_broker imports skill_mcp_launcher.boot (runner -> launcher)",
        "skill_mcp.search.index imports skill_mcp.runner.plan (search -> runner)",
        "skill_mcp_launcher.boot imports skill_mcp.catalog (launcher -> catalog)",
        "skill_mcp_launcher.boot imports skill_mcp.catalog.discover (launcher -> catalog)",
    ]
