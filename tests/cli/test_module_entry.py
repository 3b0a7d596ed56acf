"""``python -m skillmcp serve`` (the ``skillmcp`` client configuration) and ``python -m skill_mcp serve``.

Both are started as a client starts them, a real subprocess speaking stdio, and the SDK's own
client must complete the handshake and call a tool through each. The packaging test asks
setuptools which packages pyproject.toml ships, so an installed copy has both modules too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.integration.harness import build_tree

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.timeout(120)]  # slow: a server subprocess per case
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", ["skillmcp", "skill_mcp"])
async def test_python_dash_m_serves_with_the_seeds_packs_root_line(module: str, tmp_path: Path) -> None:
    root = build_tree(tmp_path / "packs")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", module, "serve", "--packs-root", str(root)],
        env={"SKILL_MCP_LOG": "warning", "HOME": str(tmp_path)},
        cwd=str(tmp_path),
    )
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"skill_list", "skill_load", "skill_file"} <= names
        result = await client.call_tool("skill_list", {})
    assert not result.is_error
    assert {s["name"] for s in (result.structured_content or {})["skills"]} >= {"alpha", "beta"}


@pytest.mark.parametrize("module", ["skillmcp", "skill_mcp"])
def test_python_dash_m_prints_the_cli_version(module: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("skill-mcp ")


def test_the_package_configuration_ships_both_entry_modules() -> None:
    """What setuptools packages, found the way pyproject.toml tells it to (no build backend needed)."""
    import tomllib

    from setuptools import find_packages

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    found = set(find_packages(where=str(REPO / config["find"]["where"][0]), include=config["find"]["include"]))
    assert {"skillmcp", "skill_mcp", "skill_mcp.cli", "skill_mcp_launcher"} <= found
    assert (REPO / "src" / "skillmcp" / "__main__.py").is_file()
    assert (REPO / "src" / "skill_mcp" / "__main__.py").is_file()
