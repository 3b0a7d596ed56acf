"""The SKILL.md vectors and their expected outcomes (``vectors/``), and the check each one passes.

Shared by ``test_vectors.py`` (the loader the server uses: libyaml when PyYAML has it) and
``test_yaml_loaders.py`` (the pure-Python loader), so each vector runs once under each loader.
"""

from __future__ import annotations

import json
from pathlib import Path

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings

VECTORS = Path(__file__).parent / "vectors"
EXPECTED: dict[str, dict] = json.loads((VECTORS / "expected.json").read_text(encoding="utf-8"))


def check_vector(name: str, tmp_path: Path) -> None:
    """Build a catalog of vector ``name`` alone under ``tmp_path`` and assert its expected outcome."""
    expected = EXPECTED[name]
    skill_dir = tmp_path / name
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_bytes((VECTORS / f"{name}.md").read_bytes())
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    reasons = sorted({p.reason.value for p in catalog.problems})
    assert reasons == expected["reasons"], [p.to_dict() for p in catalog.problems]
    # Which rule keeps the skill out of the Skills extension (none: it is published).
    assert sorted(p.rule for p in catalog.problems if p.rule) == expected.get("extensionRules", [])
    if expected["outcome"] == "refused":
        assert name not in catalog.skills
        return
    skill = catalog.skills[name]
    for key, value in expected.get("frontmatter", {}).items():
        assert skill.frontmatter[key] == value
    if {"declaration-invalid", "declaration-version"} & set(expected["reasons"]):
        assert skill.declaration is None
    if "scripts" in expected:
        assert skill.declaration is not None
        rows = [
            {"script": r.script, "interpreter": r.interpreter, "env": list(r.env), "timeout": r.timeout}
            for r in skill.declaration.run
        ]
        assert rows == expected["scripts"]
