"""A compromised server cannot widen a run: the broker decides, in the real image.

The stand-in server (helpers/broker_client.py, started by the launcher exactly as the real
server: its uid, no capabilities) plays an attacker who has taken over the server process
and sends the broker forged requests, one per test. Each is refused with its reason, nothing
is spawned (the broker's own run counter in ``hello`` does not move), the broker keeps
serving, and the legitimate request next to it runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.appliance.conftest import SKILLS, Appliance, probe_plan

pytestmark = pytest.mark.appliance

CANARY = "probe-canary-" + hashlib.sha256(b"test_broker_policy").hexdigest()[:16]


@pytest.fixture(scope="module")
def attacker(image: str) -> Iterator[Appliance]:
    app = Appliance(image, env={"PROBE_TOKEN": CANARY, "LD_PRELOAD": "/nonexistent.so"})
    try:
        yield app
    finally:
        app.close()


def _runs(app: Appliance) -> int:
    hello = app.request({"op": "hello"})
    assert hello["ok"], hello
    return int(hello["runs"])


FORBIDDEN: list[tuple[str, dict[str, Any], str]] = [
    ("undeclared_script", {"script": "scripts/../SKILL.md"}, "undeclared-script"),
    ("undeclared_file", {"script": "scripts/probe.py.bak"}, "undeclared-script"),
    ("declared_but_ungranted_script", {"script": "scripts/ungranted.py", "args": []}, "not-granted"),
    ("unknown_skill", {"skill": "no-such-skill"}, "unknown-skill"),
    ("ld_preload", {"env": ["LD_PRELOAD"]}, "env-forbidden"),
    ("ld_library_path", {"env": ["LD_LIBRARY_PATH"]}, "env-forbidden"),
    ("bash_env", {"env": ["BASH_ENV"]}, "env-forbidden"),
    ("env", {"env": ["ENV"]}, "env-forbidden"),
    ("node_options", {"env": ["NODE_OPTIONS"]}, "env-forbidden"),
    ("pythonpath", {"env": ["PYTHONPATH"]}, "env-forbidden"),
    ("pythonstartup", {"env": ["PYTHONSTARTUP"]}, "env-forbidden"),
    ("pythonhome", {"env": ["PYTHONHOME"]}, "env-forbidden"),
    ("ungranted_variable", {"env": ["AWS_SECRET_ACCESS_KEY"]}, "env-not-granted"),
    ("variable_values", {"env": {"PROBE_TOKEN": "forged-by-the-server"}}, "invalid-arguments"),
    ("undeclared_host", {"egress": ["other.test"]}, "egress-not-granted"),
    ("declared_but_ungranted_host", {"egress": ["declared-not-granted.example"]}, "egress-not-granted"),
    ("timeout_above_the_declared_one", {"timeout_s": 31}, "timeout-not-allowed"),
    ("timeout_above_the_ceiling", {"timeout_s": 301}, "timeout-not-allowed"),
    ("timeout_that_never_expires", {"timeout_s": float("nan")}, "invalid-arguments"),
    ("other_interpreter_of_the_set", {"interpreter": "bash"}, "interpreter-mismatch"),
    ("forged_argv", {"argv": ["/usr/bin/bash", "-c", "id"]}, "invalid-arguments"),
    ("forged_cwd", {"cwd": "/"}, "invalid-arguments"),
    ("forged_interpreter_path", {"interpreter_path": "/bin/sh"}, "invalid-arguments"),
]


@pytest.mark.parametrize(("denial", "change", "reason"), FORBIDDEN, ids=[f[0] for f in FORBIDDEN])
def test_broker_refuses_forged_request(attacker: Appliance, denial: str, change: dict[str, Any], reason: str) -> None:
    before = _runs(attacker)
    forged = probe_plan("id")
    forged["run"].update(change)
    reply = attacker.request(forged)
    assert reply["ok"] is False and reply["reason"] == reason, reply
    assert _runs(attacker) == before  # nothing was spawned
    # Positive control: the broker still serves, and the legitimate request runs.
    legit = attacker.run("id")
    assert legit["ok"] and legit["out"]["uid"] == 10002, legit
    assert _runs(attacker) == before + 1


def test_granted_variable_reaches_the_script_from_the_launcher_not_the_server(attacker: Appliance) -> None:
    got = attacker.run("envhash", "PROBE_TOKEN", env=["PROBE_TOKEN"])["out"]
    assert got == {"present": True, "sha256": hashlib.sha256(CANARY.encode()).hexdigest()}
    # The server's side knows the name only: the value is not in its environment.
    me = attacker.request({"op": "self"})
    assert "PROBE_TOKEN" not in me["env_names"] and "SKILL_MCP_BROKER_HOLDS" in me["env_names"]
    holds = attacker.request(
        {"op": "exec", "argv": ["/usr/bin/python3", "-c", "import os; print(os.environ['SKILL_MCP_BROKER_HOLDS'])"]}
    )
    assert holds["stdout"].strip() == "PROBE_TOKEN"


def test_loader_variable_in_the_container_never_reaches_a_script(attacker: Appliance) -> None:
    # LD_PRELOAD is set in the container's environment; no request can have it handed.
    out = attacker.run("id")["out"]
    assert "LD_PRELOAD" not in out["env"] and "PROBE_TOKEN" in out["env"]


def test_requested_hosts_narrow_the_run(attacker: Appliance) -> None:
    # Granted: allowed.test and two more; a request naming only ext-allowed.example gets only that
    # one, so allowed.test answers 403 for this run (no peers on this network: the proxy's
    # refusal is what is asserted, never a connection).
    narrowed = attacker.run("net", "proxy", "http://allowed.test/", egress=("ext-allowed.example",))["out"]
    assert narrowed == {"status": 403}


def _skills_with_hostile_files(base: Path) -> Path:
    root = base / "skills"
    shutil.copytree(SKILLS / "probe", root / "probe")
    shutil.copytree(SKILLS / "probe", root / "rootonly")
    md = root / "rootonly" / "SKILL.md"
    md.write_text(md.read_text(encoding="utf-8").replace("name: probe", "name: rootonly"), encoding="utf-8")
    md.chmod(0o600)  # readable by root only: a root parser would read it, the parse user cannot
    bomb = root / "bomb"
    (bomb / "scripts").mkdir(parents=True)
    laughs = "".join(f"  l{i}: &l{i} [*l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}]\n" for i in range(1, 12))
    (bomb / "SKILL.md").write_text(
        "---\nname: bomb\ndescription: d\nx:\n  l0: &l0 [lol]\n" + laughs + "---\n", encoding="utf-8"
    )
    huge = root / "huge"
    huge.mkdir()
    (huge / "SKILL.md").write_text(
        "---\nname: huge\ndescription: " + "x" * (20 * 1024 * 1024) + "\n---\n", encoding="utf-8"
    )
    link = root / "environ"
    link.mkdir()
    os.symlink("/proc/1/environ", link / "SKILL.md")  # the launcher's environment, holding the owner's secrets
    os.chmod(base, 0o755)
    for path in (root, *root.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    return root


def test_hostile_skill_md_never_reaches_a_root_parser(image: str, tmp_path: Path) -> None:
    root = _skills_with_hostile_files(tmp_path)
    rows = [{"skill": s, "script": "scripts/probe.py"} for s in ("probe", "rootonly", "bomb", "huge", "environ")]
    app = Appliance(image, env={"MCP_SKILL_RUN": json.dumps(rows)}, skills=["-v", f"{root}:/skills:ro"])
    try:
        hello = app.request({"op": "hello"})
        # The declarations were read as the parse user, never root, and only the good skill
        # has one that parses (the bomb's aliases, the 20 MiB file, the link are refused).
        assert hello["declarations"]["parsedAsUid"] == 10004, hello
        assert hello["declarations"]["skills"] == 1, hello
        for skill in ("rootonly", "bomb", "huge", "environ"):
            reply = app.request(probe_plan("id", skill=skill))
            assert reply["ok"] is False and reply["reason"] == "unknown-skill", (skill, reply)
        # Positive control: the same skill that the parse user can read runs; the root-only copy
        # differs from it only in its name and its mode.
        good = app.run("id")
        assert good["ok"] and good["out"]["uid"] == 10002, good
    finally:
        app.close()
    assert '"event": "declarations"' in app.stderr()
