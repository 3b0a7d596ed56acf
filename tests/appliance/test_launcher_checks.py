"""The broker's own checks of a run request (``skill_mcp_launcher.checks``). No Docker.

A table of requests a compromised server could send, each with the reason it is refused,
and the untouched request as the positive control.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp_launcher import checks

PY = "/usr/bin/python3.11"
INTERPRETERS = {"python": PY, "node": "/usr/bin/node", "bash": "/usr/bin/bash"}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    skill = tmp_path / "skills" / "s"
    (skill / "scripts" / "dir").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n", encoding="utf-8")
    (skill / "scripts" / "a.py").write_text("print(1)\n", encoding="utf-8")
    os.symlink("/etc/hostname", skill / "scripts" / "out.py")
    (tmp_path / "skills" / "bare").mkdir()
    (tmp_path / "skills" / "bare" / "x.py").write_text("", encoding="utf-8")
    os.symlink(skill, tmp_path / "skills" / "alias")
    return Path(os.path.realpath(tmp_path / "skills"))


def plan(root: Path, **change: Any) -> dict[str, Any]:
    skill = root / "s"
    base: dict[str, Any] = {
        "skill": "s", "script": "scripts/a.py", "interpreter": "python", "interpreter_path": PY,
        "argv": [PY, str(skill / "scripts" / "a.py"), "--flag"], "cwd": str(skill),
        "env": {"LANG": "C.UTF-8", "TMPDIR": ""}, "timeout_s": 30, "egress": ["api.example"],
    }
    base.update(change)
    return base


def check(root: Path, raw: Any) -> tuple[Any, list[str]]:
    return checks.check_plan(raw, interpreters=INTERPRETERS, roots=(str(root),))


def test_untouched_plan_passes(root: Path) -> None:
    job, notes = check(root, plan(root))
    assert job.argv[1] == str(root / "s" / "scripts" / "a.py") and job.egress == ("api.example",)
    assert notes == []


CASES = [
    ("interpreter outside the set", {"interpreter": "perl"}, "interpreter-unavailable"),
    ("interpreter path not the broker's", {"interpreter_path": "/bin/sh"}, "interpreter-unavailable"),
    ("argv[0] not the interpreter", {"argv": ["/bin/sh", "x"]}, "interpreter-unavailable"),
    ("script path with dot-dot", {"script": "../s/scripts/a.py"}, "invalid-path"),
    ("absolute script path", {"script": "/etc/passwd"}, "invalid-path"),
    ("symlink leaving the skill", {"script": "scripts/out.py"}, "outside-skill"),
    ("a directory", {"script": "scripts/dir"}, "not-a-file"),
    ("missing file", {"script": "scripts/none.py"}, "not-found"),
    ("argv[1] not the script", {"argv": [PY, "/etc/passwd"]}, "outside-skill"),
    ("cwd outside the roots", {"cwd": "/etc"}, "outside-skill"),
    ("cwd not a real path", {"cwd": "ALIAS"}, "outside-skill"),
    ("cwd without SKILL.md", {"cwd": "BARE"}, "outside-skill"),
    ("env name not an identifier", {"env": {"A=B": "x"}}, "invalid-arguments"),
    ("env value with NUL", {"env": {"A": "x\x00y"}}, "invalid-arguments"),
    ("env not an object", {"env": ["A"]}, "invalid-arguments"),
    ("timeout zero", {"timeout_s": 0}, "invalid-arguments"),
    ("timeout over the ceiling", {"timeout_s": 301}, "invalid-arguments"),
    ("timeout a boolean", {"timeout_s": True}, "invalid-arguments"),
    ("argv not a list", {"argv": "python a.py"}, "invalid-arguments"),
    ("argument with NUL", {"argv": [PY, "X", "a\x00b"]}, "invalid-arguments"),
]


@pytest.mark.parametrize(("what", "change", "reason"), CASES, ids=[c[0] for c in CASES])
def test_broker_refuses_a_tampered_plan(root: Path, what: str, change: dict[str, Any], reason: str) -> None:
    raw = plan(root, **change)
    if raw["cwd"] in ("ALIAS", "BARE"):
        raw["cwd"] = str(root.parent / "skills" / ("alias" if raw["cwd"] == "ALIAS" else "bare"))
        if "BARE" in what or "SKILL.md" in what:
            raw.update(script="x.py", argv=[PY, str(root / "bare" / "x.py")])
    if raw["argv"][1:2] == ["X"]:
        raw["argv"][1] = str(root / "s" / "scripts" / "a.py")
    with pytest.raises(SkillMcpError) as info:
        check(root, raw)
    assert str(info.value.reason) == reason


def test_egress_names_that_are_not_plain_hosts_are_dropped_with_a_note(root: Path) -> None:
    job, notes = check(root, plan(root, egress=["api.example", "10.0.0.1", "api.example.", "*.example"]))
    assert job.egress == ("api.example",)
    assert len(notes) == 3


def test_run_env_fixes_the_broker_owned_names(root: Path) -> None:
    env = checks.run_env({"PATH": "/evil", "HOME": "/", "HTTP_PROXY": "http://evil", "KEEP": "1"}, "/s/run-1", 8888)
    assert env["PATH"] == checks.FIXED_PATH and env["HOME"] == env["TMPDIR"] == "/s/run-1"
    assert env["HTTP_PROXY"] == env["https_proxy"] == "http://127.0.0.1:8888"
    assert env["KEEP"] == "1"
