"""skill_list says which declared scripts cannot run here and which the grant leaves out."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.harness import connect
from tests.serve import SKILL_MCP

pytestmark = pytest.mark.anyio

SKILL = """---
name: tools
description: Declares one runnable script, one for an interpreter this deployment lacks.
mcp-host:
  version: 1
  run:
    - script: ok.py
      interpreter: python
    - script: gem.rb
      interpreter: ruby
---
# Tools
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    skill = tmp_path / "skills" / "tools"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL)
    (skill / "ok.py").write_text("print('ok')\n")
    (skill / "gem.rb").write_text("puts 1\n")
    return tmp_path / "skills"


async def entry(root: Path, env: dict[str, str]) -> dict:
    async with connect(root, "legacy", env) as client:
        result = await client.call_tool("skill_list", {})
        assert not result.is_error
        page = result.structured_content
        assert page is not None
        return page


@pytest.mark.slow
async def test_unavailable_interpreter_is_listed_with_the_deployments_set(root: Path) -> None:
    page = await entry(root, {})
    (skill,) = page["skills"]
    (unavailable,) = skill["unavailableScripts"]
    assert unavailable["script"] == "gem.rb" and unavailable["interpreter"] == "ruby"
    assert "python" in unavailable["detail"] and "node" in unavailable["detail"]
    # Positive control: standalone, the declaration stands, so nothing is ungranted (an empty
    # list is left out of the entry).
    assert "ungrantedScripts" not in skill
    assert page["grantFrom"] == "declaration"


@pytest.mark.slow
async def test_hosted_default_lists_declared_scripts_as_ungranted(root: Path) -> None:
    page = await entry(root, {"MCP_HOST_METER_FILE": "/dev/null"})
    (skill,) = page["skills"]
    assert skill["ungrantedScripts"] == ["ok.py"]
    assert "grantNote" in page and page["grantFrom"] != "declaration"


@pytest.mark.slow
async def test_an_interpreter_outside_the_closed_set_is_an_error_level_problem_too(root: Path) -> None:
    page = await entry(root, {})
    (problem,) = [p for p in page["problems"] if p["reason"] == "interpreter-unavailable"]
    assert problem["level"] == "error" and problem["skill"] == "tools" and "gem.rb" in problem["detail"]
    assert page["problemCount"] == len(page["problems"]) == 1  # once: the runnable ok.py is not a problem


def test_validate_reports_the_same_problem_and_fails_without_strict(root: Path) -> None:
    done = subprocess.run(
        [SKILL_MCP, "validate", "--json", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "SKILL_MCP_LOG": "warning"},
    )
    assert done.returncode == 1, done.stdout
    (problem,) = json.loads(done.stdout)["problems"]
    assert (problem["reason"], problem["level"]) == ("interpreter-unavailable", "error")
    assert "gem.rb" in problem["detail"] and "ruby" in problem["detail"]


def test_validate_of_a_skill_whose_interpreters_are_all_in_the_set_passes(root: Path) -> None:
    (root / "tools" / "SKILL.md").write_text(SKILL.replace("interpreter: ruby", "interpreter: bash"))
    done = subprocess.run(
        [SKILL_MCP, "validate", "--json", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "SKILL_MCP_LOG": "warning"},
    )
    assert done.returncode == 0 and json.loads(done.stdout)["problems"] == []
