"""Script references, skill names and arguments: which code can be made to run.

Three layers are each held to the refusal, because each is a boundary of its own:

* the real server (SDK client over stdio): a reference the skill did not declare is refused
  ``undeclared-script`` before any path is joined; a declared name that is really a trap
  (symlink out, FIFO, device ...) is refused by the resolved-path check;
* ``skill_mcp.paths`` (the string check the server and the launcher share): ``invalid-path``;
* the appliance broker's own decision (``skill_mcp_launcher.policy.decide``), which trusts
  nothing the server sends: the same shape in a forged request is refused there too.

Every case ends with a positive control (the declared neighbour runs) and, via
``conftest.after_each``, the server answering and no process of the script uid left.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from skill_mcp.catalog.declaration import DeclarationError, build_declaration
from skill_mcp.declwire import DeclaredScript, DeclaredSkill
from skill_mcp.errors import SkillMcpError
from skill_mcp.paths import check_relpath
from skill_mcp.reasons import Refusal
from skill_mcp_launcher import checks, policy
from tests.security.conftest import TRAPS
from tests.security.harness import Session

pytestmark = pytest.mark.slow  # slow: a root server per module dropping scripts to the suite's user

PY = "/usr/bin/python3.11" if os.path.exists("/usr/bin/python3.11") else os.path.realpath("/usr/bin/python3")

# name of the denial -> a reference that must never be joined to the skill directory
SHAPES: dict[str, str] = {
    "absolute_path": "/etc/passwd",
    "absolute_path_into_skill": "{root}/sec/scripts/probe.py",
    "dotdot_to_sibling": "../other/scripts/x.py",
    "dotdot_inside": "scripts/../scripts/probe.py",
    "dot_segment": "./scripts/probe.py",
    "double_slash": "scripts//probe.py",
    "trailing_slash": "scripts/probe.py/",
    "backslash": "scripts\\probe.py",
    "percent_encoded_slash": "scripts%2Fprobe.py",
    "percent_encoded_dotdot": "%2e%2e/other/scripts/x.py",
    "double_encoded_slash": "scripts%252Fprobe.py",
    "nul_byte": "scripts/probe.py\x00.md",
    "newline_control_char": "scripts/probe.py\n",
    "escape_control_char": "scripts/\x1bprobe.py",
    "c1_control_char": "scripts/\x85probe.py",
    "unicode_division_slash": "scripts\u2215probe.py",
    "unicode_fullwidth_solidus": "scripts\uff0fprobe.py",
    "unicode_fullwidth_dotdot": "\uff0e\uff0e/other/scripts/x.py",
    "unicode_one_dot_leader_pair": "\u2024\u2024/other/scripts/x.py",
    "overlong_path": "scripts/" + "a/" * 600 + "probe.py",
    "overlong_segment": "scripts/" + "a" * 300 + ".py",
    "empty": "",
}


def _broker_decides(root: Path, script: str) -> None:
    cwd = str((root / "sec").resolve())
    skill = DeclaredSkill("sec", cwd, (0, 0, 0, 0, 0), (), (DeclaredScript("scripts/probe.py", "python", (), 30),))
    policy.decide(
        checks.parse_request({"skill": "sec", "script": script, "args": ["echo"]}),
        skills={"sec": skill},
        grants=policy.Grants("declaration"),
        interpreters={"python": PY},
        roots=(str(root.resolve()),),
        environ={},
    )


def _control(server: Session) -> None:
    """Positive control: the declared neighbour still runs, arguments verbatim."""
    result = server.probe("echo", "control")
    assert result["status"] == "ok" and result["out"] == {"argv": ["control"]}


@pytest.mark.parametrize("denial", sorted(SHAPES))
def test_script_reference_shape_refused(denial: str, server: Session, sec_root: Path) -> None:
    script = SHAPES[denial].format(root=sec_root)
    err, out = server.preview("sec", script, ["echo"])
    assert (
        err
        and out["reason"] == Refusal.UNDECLARED_SCRIPT
        and "scripts/probe.py" in out.get("declared", ["scripts/probe.py"])
    )
    with pytest.raises(SkillMcpError) as caught:
        check_relpath(script)
    assert caught.value.reason == Refusal.INVALID_PATH
    with pytest.raises(SkillMcpError) as caught:  # the broker decides a forged request on its own
        _broker_decides(sec_root, script)
    assert caught.value.reason in (Refusal.UNDECLARED_SCRIPT, Refusal.INVALID_ARGUMENTS)
    with pytest.raises(DeclarationError):  # and no skill can declare it
        build_declaration({"version": 1, "run": [{"script": script, "interpreter": "python"}]})
    _control(server)


def test_leading_dash_segment_cannot_be_declared_or_become_an_option(server: Session) -> None:
    err, out = server.preview("sec", "-c", ["print(1)"])
    assert err and out["reason"] == Refusal.UNDECLARED_SCRIPT
    with pytest.raises(DeclarationError):
        build_declaration({"version": 1, "run": [{"script": "scripts/-V.py", "interpreter": "python"}]})
    # An argument that looks like an interpreter option arrives as a plain argument after the script.
    assert server.probe("echo", "-c", "import os", "--", "-V")["out"] == {"argv": ["-c", "import os", "--", "-V"]}


@pytest.mark.parametrize("undeclared", ["SKILL.md", "notes.md", "scripts/nonexistent.py"])
def test_undeclared_file_refused(undeclared: str, server: Session) -> None:
    err, out = server.preview("sec", undeclared)
    assert err and out["reason"] == Refusal.UNDECLARED_SCRIPT
    assert "scripts/probe.py" in out["declared"]  # the refusal lists what is declared
    _control(server)


@pytest.mark.parametrize("trap", sorted(TRAPS))
def test_declared_trap_refused_by_resolved_path_check(trap: str, server: Session) -> None:
    if trap == "scripts/dev.py" and os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    started = time.monotonic()
    err, out = server.preview("sec", trap, ["echo"])
    expected = (
        Refusal.NOT_A_FILE if trap in ("scripts/fifo.py", "scripts/dir.py", "scripts/dev.py") else Refusal.OUTSIDE_SKILL
    )
    assert err and out["reason"] == expected, out
    assert time.monotonic() - started < 10  # a FIFO is never opened for reading, so nothing blocks
    # skill_list says the declared trap is not runnable, with the catalog's reason.
    listing = server.call("skill_list", {})[1]
    states = {s["script"]: s for e in listing["skills"] if e["name"] == "sec" for s in e["scripts"]}
    assert states[trap]["state"] != "runnable"
    _control(server)


def test_intermediate_directory_symlink_inside_the_skill_still_runs(server: Session) -> None:
    # The neighbour of linkdir/x.py: a directory symlink that stays inside the skill resolves and runs.
    err, out = server.run("sec", "alias/probe.py", ["echo", "via-alias"])
    assert not err and out["status"] == "ok" and '"via-alias"' in out["stdout"]
    err, out = server.preview("sec", "linkdir/x.py")
    assert err and out["reason"] == Refusal.OUTSIDE_SKILL


@pytest.mark.parametrize("name", ["../x", "../other", "SEC", "Sec", "sec\x00", "sec/", "sec/../sec", "s" * 300, ""])
def test_skill_name_refused_unknown_skill(name: str, server: Session) -> None:
    err, out = server.preview(name, "scripts/probe.py", ["echo"])
    assert err and out["reason"] in (Refusal.UNKNOWN_SKILL, Refusal.INVALID_ARGUMENTS), out
    _control(server)


def test_nul_in_argument_refused_invalid_arguments(server: Session) -> None:
    err, out = server.preview("sec", "scripts/probe.py", ["echo", "a\x00b"])
    assert err and out["reason"] == Refusal.INVALID_ARGUMENTS
    _control(server)


def test_too_many_or_too_large_arguments_refused(server: Session) -> None:
    err, out = server.preview("sec", "scripts/probe.py", ["echo"] + ["x"] * 100)
    assert err and out["reason"] == Refusal.TOO_MANY_ARGS
    err, out = server.preview("sec", "scripts/probe.py", ["echo", "x" * 20000])
    assert err and out["reason"] == Refusal.TOO_MANY_ARGS
    _control(server)


def test_shell_metacharacters_arrive_as_literal_argv(server: Session) -> None:
    args = ["$(id)", ";", "`id`", "| cat /etc/passwd", "&& touch /tmp/pwned", "*", "~", "$HOME", "'\"", "\n"]
    assert server.probe("echo", *args)["out"] == {"argv": args}
    ok, out = server.run("sec", "scripts/hello.sh", ["$(id)"])
    assert not ok and out["stdout"] == "hello $(id)\n"  # bash gets the script as a file, not as -c text
