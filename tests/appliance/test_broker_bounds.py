"""Per-skill failure stays per skill, and no frame ends PID 1: in the real image.

* One skill whose declaration names 300 hosts (past the 256 the broker holds) costs that skill
  its scripts; every other skill's script still runs. (In process, the catalog's report of it
  is ``tests/catalog/test_declaration_bounds.py``; the broker dropping only a bad entry is
  ``tests/appliance/test_launcher_checks.py``.)
* A frame nested 200,000 deep gets a refusal (its framing is whole) and the launcher goes on
  serving the same conversation; the decoder's own tests are ``tests/security/test_deep_json.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.appliance.conftest import SKILLS, Appliance, probe_plan

pytestmark = pytest.mark.appliance

MANY = (
    "---\nname: many\ndescription: Declares three hundred hosts.\nmcp-host:\n  version: 1\n  run:\n"
    "    - script: scripts/probe.py\n      interpreter: python\n  egress:\n"
    + "".join(f"    - h{i}.example.com\n" for i in range(300))
    + "---\n# many\n"
)


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    shutil.copytree(SKILLS / "probe", root / "probe")
    (root / "many" / "scripts").mkdir(parents=True)
    (root / "many" / "SKILL.md").write_text(MANY, encoding="utf-8")
    shutil.copy(SKILLS / "probe" / "scripts" / "probe.py", root / "many" / "scripts" / "probe.py")
    for path in (tmp_path, *tmp_path.rglob("*")):  # the parse user reads it inside the container
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def test_one_skill_declaring_300_hosts_cannot_stop_the_other_skills_scripts(image: str, tmp_path: Path) -> None:
    rows = [{"skill": s, "script": "scripts/probe.py"} for s in ("probe", "many")]
    app = Appliance(image, env={"MCP_SKILL_RUN": json.dumps(rows)}, skills=["-v", f"{_root(tmp_path)}:/skills:ro"])
    try:
        hello = app.request({"op": "hello"})
        assert hello["declarations"]["error"] is None and hello["declarations"]["skills"] == 1, hello
        refused = app.request(probe_plan("id", skill="many"))
        assert refused["ok"] is False and refused["reason"] in ("unknown-skill", "undeclared-script"), refused
        # The positive control: the neighbour's script runs, as the script uid.
        good = app.run("id")
        assert good["ok"] and good["out"]["uid"] == 10002, good
    finally:
        app.close()


def test_server_cannot_end_the_launcher_with_a_frame_nested_200000_deep(image: str) -> None:
    app = Appliance(image)
    try:
        answer = app.request({"op": "deep", "depth": 200_000})
        assert answer["closed"] or answer["reply"]["ok"] is False, answer
        assert not answer["closed"] and answer["reply"]["reason"] == "invalid-arguments", answer
        # The positive control: the launcher is alive and the same conversation still runs scripts.
        good = app.run("id")
        assert good["ok"] and good["out"]["uid"] == 10002, good
    finally:
        assert app.close() == 0
    assert "Traceback" not in app.stderr() and "RecursionError" not in app.stderr()
