"""The broker's own decision on a run request (``checks`` + ``policy``). No Docker.

A table of requests a compromised server could send, each with the reason it is refused,
and the plain request as the positive control. The declarations come from the real helper
program (``skill_mcp.runner.dump_declarations``) run on a fixture root, so the records are the ones
the broker gets in the image.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skill_mcp import declwire
from skill_mcp.errors import SkillMcpError
from skill_mcp.grantrules import FORBIDDEN_EXACT
from skill_mcp_launcher import checks, policy, procs
from skill_mcp_launcher.broker import Broker
from skill_mcp_launcher.sandbox import Job

PY = "/usr/bin/python3.11"
INTERPRETERS = {"python": PY, "node": "/usr/bin/node", "bash": "/usr/bin/bash"}
SKILL_MD = """---
name: s
description: d
mcp-host:
  version: 1
  run:
    - script: scripts/a.py
      interpreter: python
      timeout: 30
      env: [API_KEY, OTHER_KEY, LD_PRELOAD]
    - script: scripts/b.sh
      interpreter: bash
  egress: [api.example, declared-only.example]
---
"""
GRANT = [
    {
        "skill": "s",
        "script": "scripts/a.py",
        "env": ["API_KEY", "LD_PRELOAD"],
        "egress": ["api.example", "undeclared.example"],
    }
]
ENVIRON = {
    "API_KEY": "secret-value",
    "OTHER_KEY": "not-granted-value",
    "LANG": "C.UTF-8",
    "LD_PRELOAD": "/tmp/evil.so",
    "MCP_SKILL_RUN": json.dumps(GRANT),
    "MCP_SKILLS_PATH": "/skills",
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("skills")
    skill = base / "s"
    (skill / "scripts" / "dir").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (skill / "scripts" / "a.py").write_text("print(1)\n", encoding="utf-8")
    (skill / "scripts" / "b.sh").write_text("echo\n", encoding="utf-8")
    (base / "t").mkdir()
    (base / "t" / "SKILL.md").write_text(SKILL_MD.replace("name: s", "name: t"), encoding="utf-8")
    return Path(os.path.realpath(base))


@pytest.fixture(scope="module")
def skills(root: Path) -> dict[str, declwire.DeclaredSkill]:
    out = subprocess.run(
        [sys.executable, "-I", "-m", "skill_mcp.runner.dump_declarations"],
        capture_output=True,
        env={"SKILLS_DIR": str(root), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=True,
    )
    found = declwire.decode(out.stdout)
    assert found.parsed_as == os.getuid() and set(found.skills) == {"s", "t"} and not found.dropped
    return dict(found.skills)


def decide(
    root: Path, skills: dict[str, declwire.DeclaredSkill], raw: dict[str, Any], environ: dict[str, str] | None = None
) -> Job:
    env = ENVIRON if environ is None else environ
    return policy.decide(
        checks.parse_request(raw),
        skills=skills,
        grants=policy.Grants.from_environ(env),
        interpreters=INTERPRETERS,
        roots=(str(root),),
        environ=env,
    )


def request(**change: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"skill": "s", "script": "scripts/a.py", "args": ["--flag"]}
    base.update(change)
    return {k: v for k, v in base.items() if v is not None}


def test_plain_request_gets_the_policy_the_broker_computed(root: Path, skills: dict[str, Any]) -> None:
    job = decide(root, skills, request())
    assert job.argv == (PY, str(root / "s" / "scripts" / "a.py"), "--flag")
    assert job.cwd == str(root / "s") and job.timeout_s == 30
    # Values from the launcher's environment; granted ∩ declared only; never a loader variable.
    assert job.env == {"LANG": "C.UTF-8", "API_KEY": "secret-value"}
    assert job.egress == ("api.example",)


def test_request_names_narrow_the_run_never_widen_it(root: Path, skills: dict[str, Any]) -> None:
    job = decide(root, skills, request(env=["PATH", "TMPDIR", "HOME"], egress=[], timeout_s=5, interpreter="python"))
    assert job.env == {} and job.egress == () and job.timeout_s == 5


CASES = [
    ("undeclared script", request(script="scripts/none.py"), "undeclared-script"),
    ("declared but not granted", request(script="scripts/b.sh"), "not-granted"),
    ("unknown skill", request(skill="nope"), "unknown-skill"),
    ("skill granted nothing", request(skill="t"), "not-granted"),
    ("interpreter other than declared", request(interpreter="bash"), "interpreter-mismatch"),
    ("LD_PRELOAD", request(env=["LD_PRELOAD"]), "env-forbidden"),
    ("LD_LIBRARY_PATH", request(env=["LD_LIBRARY_PATH"]), "env-forbidden"),
    ("BASH_ENV", request(env=["BASH_ENV"]), "env-forbidden"),
    ("ENV", request(env=["ENV"]), "env-forbidden"),
    ("NODE_OPTIONS", request(env=["NODE_OPTIONS"]), "env-forbidden"),
    ("PYTHONPATH", request(env=["PYTHONPATH"]), "env-forbidden"),
    ("PYTHONSTARTUP", request(env=["PYTHONSTARTUP"]), "env-forbidden"),
    ("PYTHONHOME", request(env=["PYTHONHOME"]), "env-forbidden"),
    ("declared but not granted variable", request(env=["OTHER_KEY"]), "env-not-granted"),
    ("neither declared nor granted variable", request(env=["AWS_SECRET_ACCESS_KEY"]), "env-not-granted"),
    ("host outside declared", request(egress=["undeclared.example"]), "egress-not-granted"),
    ("host declared, not granted", request(egress=["declared-only.example"]), "egress-not-granted"),
    ("timeout above the declared one", request(timeout_s=31), "timeout-not-allowed"),
    ("timeout above the ceiling", request(timeout_s=301), "timeout-not-allowed"),
    ("timeout zero", request(timeout_s=0), "invalid-arguments"),
    ("timeout a boolean", request(timeout_s=True), "invalid-arguments"),
    ("timeout NaN (never expires)", request(timeout_s=float("nan")), "invalid-arguments"),
    ("timeout infinite", request(timeout_s=float("inf")), "invalid-arguments"),
    ("env values sent", request(env={"API_KEY": "forged"}), "invalid-arguments"),
    ("argv named", request(argv=["/bin/sh", "-c", "id"]), "invalid-arguments"),
    ("cwd named", request(cwd="/"), "invalid-arguments"),
    ("interpreter path named", request(interpreter_path="/bin/sh"), "invalid-arguments"),
    ("script path with dot-dot", request(script="../s/scripts/a.py"), "undeclared-script"),
    ("argument with NUL", request(args=["a\x00b"]), "invalid-arguments"),
    ("too many arguments", request(args=["x"] * 65), "too-many-args"),
    ("env name not an identifier", request(env=["A=B"]), "invalid-arguments"),
    ("not an object", None, "invalid-arguments"),
]


@pytest.mark.parametrize(("what", "raw", "reason"), CASES, ids=[c[0] for c in CASES])
def test_broker_refuses_a_request_beyond_its_policy(
    root: Path, skills: dict[str, Any], what: str, raw: Any, reason: str
) -> None:
    with pytest.raises(SkillMcpError) as info:
        decide(root, skills, raw)
    assert str(info.value.reason) == reason
    assert decide(root, skills, request()).argv[0] == PY  # positive control


def test_every_loader_variable_of_the_shared_list_is_refused(root: Path, skills: dict[str, Any]) -> None:
    for name in sorted(FORBIDDEN_EXACT):
        with pytest.raises(SkillMcpError) as info:
            decide(root, skills, request(env=[name]))
        assert str(info.value.reason) == "env-forbidden", name


def test_hosted_without_a_grant_runs_nothing_and_standalone_lets_the_declaration_stand(
    root: Path, skills: dict[str, Any]
) -> None:
    with pytest.raises(SkillMcpError) as info:
        decide(root, skills, request(), environ={"MCP_SKILLS_PATH": "/skills", "API_KEY": "v"})
    assert str(info.value.reason) == "not-granted"
    job = decide(root, skills, request(), environ={"API_KEY": "v", "OTHER_KEY": "w"})
    assert job.env == {"API_KEY": "v", "OTHER_KEY": "w"} and job.egress == ("api.example", "declared-only.example")


def test_held_names_are_what_the_grant_names_and_nothing_forbidden(skills: dict[str, Any]) -> None:
    assert policy.Grants.from_environ(ENVIRON).held_names(skills) == ("API_KEY",)
    assert policy.Grants.from_environ({"MCP_SKILLS_PATH": "/s"}).held_names(skills) == ()
    assert policy.Grants.from_environ({}).held_names(skills) == ("API_KEY", "OTHER_KEY")


def test_a_changed_skill_md_is_seen_by_a_stat(root: Path, skills: dict[str, Any]) -> None:
    skill = skills["s"]
    assert not skill.changed()
    path = root / "s" / "SKILL.md"
    os.utime(path, ns=(1, 1))
    try:
        assert skill.changed()
    finally:
        path.write_text(SKILL_MD, encoding="utf-8")


BAD_DOCUMENTS = [b"not json", b"[]", b'{"uid": 0}', b'{"uid": "0", "skills": []}']
GOOD_ENTRY = (
    b'{"name": "g", "directory": "/d", "skillMd": [1,2,3,4,5], "egress": [], '
    b'"scripts": [{"script": "a", "interpreter": "python", "env": ["A"], "timeout": 1}]}'
)
BAD_ENTRIES = [
    b'{"name": "s"}',
    b'{"name": "s", "directory": "rel", "skillMd": [1,2,3,4,5], "egress": [], "scripts": []}',
    b'{"name": "s", "directory": "/d", "skillMd": [1,2,3,4,5], "egress": [], '
    b'"scripts": [{"script": "a", "interpreter": "python", "env": ["A=B"], "timeout": 1}]}',
    b'{"name": "s", "directory": "/d", "skillMd": [1,2,3,4,5], "egress": [], '
    b'"scripts": [{"script": "a", "interpreter": "python", "env": [], "timeout": true}]}',
    # Past the bounds the catalog enforces too: 257 hosts, 257 scripts, a 33-character interpreter.
    b'{"name": "s", "directory": "/d", "skillMd": [1,2,3,4,5], "egress": ['
    + b",".join(b'"h%d.example"' % i for i in range(257))
    + b'], "scripts": []}',
    b'{"name": "s", "directory": "/d", "skillMd": [1,2,3,4,5], "egress": [], "scripts": ['
    + b",".join(b'{"script": "a%d", "interpreter": "python", "env": [], "timeout": 1}' % i for i in range(257))
    + b"]}",
    b'{"name": "s", "directory": "/d", "skillMd": [1,2,3,4,5], "egress": [], '
    b'"scripts": [{"script": "a", "interpreter": "' + b"p" * 33 + b'", "env": [], "timeout": 1}]}',
]


@pytest.mark.parametrize("raw", BAD_DOCUMENTS)
def test_helper_output_out_of_shape_is_refused(raw: bytes) -> None:
    with pytest.raises(declwire.DeclaredError):
        declwire.decode(raw)
    assert set(declwire.decode(b'{"uid": 0, "skills": [' + GOOD_ENTRY + b"]}").skills) == {"g"}


@pytest.mark.parametrize("entry", BAD_ENTRIES)
def test_one_skill_out_of_shape_cannot_stop_the_other_skills(entry: bytes) -> None:
    found = declwire.decode(b'{"uid": 0, "skills": [' + entry + b", " + GOOD_ENTRY + b"]}")
    assert set(found.skills) == {"g"}  # the positive control: the neighbour stays runnable
    assert set(found.dropped) == {"s"} and found.dropped["s"].detail


def test_broker_refuses_only_the_dropped_skill_and_asks_the_helper_nothing_while_it_is_unchanged(
    tmp_path: Path,
) -> None:
    keys = {}
    for name in ("good", "bad"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text("x", encoding="utf-8")
        st = os.stat(tmp_path / name / "SKILL.md")
        keys[name] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    good = declwire.DeclaredSkill("good", str(tmp_path / "good"), keys["good"], (), ())
    bad = declwire.Dropped("bad", "egress is not a list of at most 256 entries", str(tmp_path / "bad"), keys["bad"])
    users = procs.Users(*(procs.Account(n, u, u) for n, u in (("s", 65001), ("c", 65002), ("p", 65003))))
    broker = Broker(
        users=users,
        reaper=procs.Reaper(),
        roots=(str(tmp_path),),
        interpreters={},
        fence_ok=True,
        fence_detail="",
        grants=policy.Grants("declaration"),
        environ={},
        parse_user=procs.Account("x", 65004, 65004),
        declarations=declwire.Declarations({"good": good}, 65004, {"bad": bad}),
    )
    with pytest.raises(SkillMcpError) as info:
        broker._skills("bad")
    assert str(info.value.reason) == "undeclared-script" and "256" in info.value.detail
    assert set(broker._skills("good")) == {"good"}  # the positive control: the neighbour is there
    # No helper was asked again: the declarations are still the ones given (a re-read replaces them).
    assert broker.declarations is not None and set(broker.declarations.dropped) == {"bad"}


def test_a_name_listed_twice_is_dropped_both_times() -> None:
    found = declwire.decode(b'{"uid": 0, "skills": [' + GOOD_ENTRY + b", " + GOOD_ENTRY + b"]}")
    assert dict(found.skills) == {} and set(found.dropped) == {"g"}


def test_server_environment_holds_granted_names_never_their_values() -> None:
    from skill_mcp_launcher import boot

    environ = {"API_KEY": "secret-value", "MCP_SKILL_RUN": ENVIRON["MCP_SKILL_RUN"], "OTHER": "kept", "PATH": "/x"}
    env = boot.server_env(environ, ("API_KEY", "NOT_SET"))
    assert "API_KEY" not in env and "secret-value" not in env.values()
    assert env["SKILL_MCP_BROKER_HOLDS"] == "API_KEY"  # names of held variables that are set, only
    # Positive control: the rest of the owner's configuration still reaches the server.
    assert env["OTHER"] == "kept" and env["MCP_SKILL_RUN"] == environ["MCP_SKILL_RUN"]
