"""skill_list says which declared scripts cannot run here and which the grant leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.harness import connect

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


async def test_hosted_default_lists_declared_scripts_as_ungranted(root: Path) -> None:
    page = await entry(root, {"MCP_HOST_METER_FILE": "/dev/null"})
    (skill,) = page["skills"]
    assert skill["ungrantedScripts"] == ["ok.py"]
    assert "grantNote" in page and page["grantFrom"] != "declaration"
