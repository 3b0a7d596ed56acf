"""The declared-skills document: one record type, one encoder and one decoder for the parse
helper (``runner.dump_declarations``) and the appliance's broker (``skill_mcp_launcher.parse_helper``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skill_mcp import declwire
from skill_mcp.declwire import DeclaredScript, DeclaredSkill

names = st.text(st.sampled_from("abcxyz-_"), min_size=1, max_size=12)
variables = st.from_regex(r"[A-Z_][A-Z0-9_]{0,10}", fullmatch=True)
script = st.builds(
    DeclaredScript,
    st.from_regex(r"scripts/[a-z]{1,8}\.(py|js|sh)", fullmatch=True),
    st.sampled_from(("python", "node", "bash")),
    st.lists(variables, unique=True, max_size=4).map(tuple),
    st.integers(1, 24 * 3600),
)
skill = st.builds(
    DeclaredSkill,
    names,
    names.map(lambda n: f"/skills/{n}"),
    st.tuples(*[st.integers(0, 2**62)] * 5),
    st.lists(st.sampled_from(("api.example", "b.example")), unique=True).map(tuple),
    st.lists(script, max_size=3, unique_by=lambda d: d.script).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(uid=st.integers(0, 2**31), skills=st.lists(skill, max_size=5, unique_by=lambda s: s.name))
def test_what_the_helper_encodes_the_broker_decodes_unchanged(uid: int, skills: list[DeclaredSkill]) -> None:
    found = declwire.decode(declwire.encode(uid, skills))
    assert found.parsed_as == uid and not found.dropped
    assert dict(found.skills) == {s.name: s for s in skills}


def test_an_entry_out_of_shape_costs_only_itself() -> None:
    # Positive control for the property above: the decoder does check, entry by entry.
    good = DeclaredSkill("good", "/skills/good", (1, 2, 3, 4, 5), (), (DeclaredScript("s.py", "python", (), 30),))
    doc = json.loads(declwire.encode(7, [good]))
    doc["skills"].append({**doc["skills"][0], "name": "bad", "directory": "relative"})
    found = declwire.decode(json.dumps(doc).encode())
    assert set(found.skills) == {"good"} and set(found.dropped) == {"bad"}
    with pytest.raises(declwire.DeclaredError):
        declwire.decode(b" " * (declwire.MAX_DOCUMENT + 1))


def test_the_helper_program_writes_the_document(tmp_path: Path) -> None:
    # The real helper, run on a real root: its stdout decodes to the records of the skill it parsed.
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "f.py").write_text("print(1)\n")
    (tmp_path / "w" / "SKILL.md").write_text(
        "---\nname: w\ndescription: a test skill\nmcp-host:\n  version: 1\n  run:\n    - script: f.py\n      interpreter: python\n"
        "      env: [W_KEY]\n      timeout: 20\n  egress: [api.example]\n---\nBody.\n"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SKILLS_DIR": str(tmp_path),
        "SKILL_MCP_LOG": "error",
        "SKILL_MCP_CACHE": "off",
    }
    out = subprocess.run(
        [sys.executable, "-I", "-m", "skill_mcp.runner.dump_declarations"],
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    )
    found = declwire.decode(out.stdout)
    assert found.parsed_as == os.getuid()
    w = found.skills["w"]
    assert (w.egress, w.scripts) == (("api.example",), (DeclaredScript("f.py", "python", ("W_KEY",), 20),))
    assert w.skill_md == declwire.skill_md_key(str(tmp_path / "w")) and not w.changed()
