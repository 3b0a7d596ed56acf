"""Standalone: every run in a kernel sandbox of its own, proved by what a script tries.

The server runs as ``nobody`` (setpriv): the script is then the same uid as the server and as
the files the test plants for that uid, which is the case the sandbox exists for (a root reader
would pass every permission check and prove nothing). Each test names the denial; beside each
denied call its legitimate neighbour works, and ``test_positive_control_*`` runs the very probe
outside the sandbox, where every denied call succeeds.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skill_mcp import confine, limits, sandbox_rules

from .helpers import NOBODY, nobody_python

HERE = Path(__file__).parent
CANARY = "-----BEGIN OPENSSH PRIVATE KEY----- canary-7f3a"

# Each argument OP:PARAM is tried; the answer is {argument: 0 or errno}.
PROBE = r"""
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def err(result):
    return ctypes.get_errno() if result == -1 else 0
def attempt(op, param):
    if op == "read":
        with open(param) as fh:
            return 0 if fh.read() is not None else 0
    if op == "write":
        with open(param, "w") as fh:
            fh.write("x")
        return 0
    if op == "connect":
        with socket.create_connection(("127.0.0.1", int(param)), timeout=5):
            return 0
    if op == "shmget":  # each object made is removed at once (IPC_RMID): the control leaves none
        made = libc.shmget(0, 4096, 0o1000 | 0o600)
        return err(made) if made == -1 else libc.shmctl(made, 0, None)
    if op == "msgget":
        made = libc.msgget(0, 0o1000 | 0o600)
        return err(made) if made == -1 else libc.msgctl(made, 0, None)
    if op == "semget":
        made = libc.semget(0, 1, 0o1000 | 0o600)
        return err(made) if made == -1 else libc.semctl(made, 0, 0)
    if op == "mq_open":
        return err(libc.mq_open(b"/skill-mcp-" + str(os.getpid()).encode(), os.O_CREAT | os.O_RDWR, 0o600, None))
    if op == "io_uring_setup":
        return err(libc.syscall(425, 1, None))
    raise ValueError(op)
out = {}
for arg in sys.argv[1:]:
    op, _, param = arg.partition(":")
    try:
        out[arg] = attempt(op, param.replace("$TMPDIR", os.environ["TMPDIR"]))
    except OSError as exc:
        out[arg] = exc.errno
print(json.dumps({"probe": out, "home": os.environ.get("HOME"), "tmpdir": os.environ.get("TMPDIR")}))
"""
BASH = 'set -e\nread -r line < "$PWD/data.txt"\necho "$line" > "$TMPDIR/copy"\ncat "$TMPDIR/copy"\n'
NODE = (
    "const fs = require('fs'), path = require('path');\n"
    "const f = path.join(process.env.TMPDIR, 'n.txt');\n"
    "fs.writeFileSync(f, fs.readFileSync(path.join(__dirname, 'data.txt')));\n"
    "console.log(fs.readFileSync(f, 'utf8').trim());\n"
)


def _kernel_can() -> bool:
    try:
        confine.probe(sandbox_rules.MIN_LANDLOCK_ABI)
    except confine.SandboxUnavailable:
        return False
    return True


pytestmark = pytest.mark.skipif(not _kernel_can(), reason="this kernel cannot confine a run")


def _skill(root: Path, name: str, files: dict[str, str], run: list[tuple[str, str]], egress: bool = False) -> None:
    lines = [f"    - script: {script}\n      interpreter: {interp}\n      timeout: 30\n" for script, interp in run]
    hosts = "  egress:\n    - example.com\n" if egress else ""
    (root / name).mkdir()
    (root / name / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Sandbox probe.\nmcp-host:\n  version: 1\n{hosts}  run:\n{''.join(lines)}"
        "---\nProbe.\n",
        encoding="utf-8",
    )
    for rel, text in files.items():
        (root / name / rel).write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Path]]:
    """Skills (world-readable), a fake HOME with a key, and a loose file of the uid, both nobody's."""
    if nobody_python() is None:
        pytest.skip("needs root, setpriv and a Python the unprivileged user can run")
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-sandbox-"))
    base.chmod(0o755)
    skills, home, loose = base / "skills", base / "home", base / "loose"
    for path in (skills, home, loose):
        path.mkdir()
    _skill(
        skills,
        "probe",
        {"probe.py": PROBE, "probe.sh": BASH, "probe.js": NODE, "data.txt": "bundle-data\n"},
        [("probe.py", "python"), ("probe.sh", "bash"), ("probe.js", "node")],
    )
    _skill(skills, "net", {"probe.py": PROBE}, [("probe.py", "python")], egress=True)
    _skill(skills, "other", {"secret.txt": "other-skill-secret\n"}, [])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text(CANARY, encoding="utf-8")
    (loose / "notes.txt").write_text("uid-file\n", encoding="utf-8")
    for path in (home, home / ".ssh", home / ".ssh" / "id_rsa", loose, loose / "notes.txt"):
        os.chown(path, NOBODY, NOBODY)
    (home / ".ssh" / "id_rsa").chmod(0o600)
    try:
        yield {"base": base, "skills": skills, "home": home, "loose": loose}
    finally:
        subprocess.run(["rm", "-rf", "--", str(base)], check=False)


def serve(
    world: dict[str, Path],
    skill: str,
    script: str,
    *args: str,
    wrap: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    found = nobody_python()
    assert found is not None
    python, pythonpath = found
    environ = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": pythonpath,
        "HOME": str(world["home"]),
        "SKILL_MCP_LOG": "warning",
        **(env or {}),
    }
    done = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            *wrap,
            python,
            str(HERE / "sandbox_server.py"),
            str(world["skills"]),
            skill,
            script,
            *args,
        ],
        env=environ,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    out: dict[str, Any] = json.loads(done.stdout)
    out["stderr"] = done.stderr.decode(errors="replace")
    return out


def probe(world: dict[str, Path], *ops: str, skill: str = "probe") -> dict[str, Any]:
    out = serve(world, skill, "probe.py", *ops)
    assert out.get("result", {}).get("status") == "ok", out
    answer: dict[str, Any] = json.loads(out["result"]["stdout"])
    return answer


def test_a_script_cannot_read_another_skill_the_servers_home_or_a_file_of_its_uid(world: dict[str, Path]) -> None:
    denied = [
        f"read:{world['skills']}/other/secret.txt",
        f"read:{world['home']}/.ssh/id_rsa",
        f"read:{world['loose']}/notes.txt",
    ]
    allowed = [f"read:{world['skills']}/probe/data.txt", "read:/etc/passwd"]
    got = probe(world, *denied, *allowed)["probe"]
    assert {op: got[op] for op in denied} == dict.fromkeys(denied, errno.EACCES)
    assert {op: got[op] for op in allowed} == dict.fromkeys(allowed, 0)  # its own bundle and the runtime


def test_a_script_cannot_write_outside_its_run_directory(world: dict[str, Path]) -> None:
    tag = f"skill-mcp-sandbox-{os.getpid()}"
    denied = [
        f"write:/tmp/{tag}",
        f"write:/dev/shm/{tag}",
        f"write:/var/tmp/{tag}",
        f"write:{world['home']}/planted",
        f"write:{world['skills']}/probe/planted",
    ]
    answer = probe(world, *denied, "write:$TMPDIR/own")
    got = answer["probe"]
    assert {op: got[op] for op in denied} == dict.fromkeys(denied, errno.EACCES)
    assert got["write:$TMPDIR/own"] == 0 and answer["home"] == answer["tmpdir"]  # HOME is the run directory
    for path in (f"/tmp/{tag}", f"/dev/shm/{tag}", f"/var/tmp/{tag}"):
        assert not os.path.exists(path)


IPC = ("shmget", "msgget", "semget", "mq_open", "io_uring_setup")


def test_a_script_cannot_make_sysv_or_posix_ipc_or_an_io_uring(world: dict[str, Path]) -> None:
    got = probe(world, *IPC)["probe"]
    assert got == dict.fromkeys(IPC, errno.EPERM)


def test_positive_control_the_same_probe_unconfined_does_all_of_it(world: dict[str, Path]) -> None:
    found = nobody_python()
    assert found is not None
    tag = f"/dev/shm/skill-mcp-sandbox-control-{os.getpid()}"
    done = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            found[0],
            "-c",
            PROBE,
            f"read:{world['home']}/.ssh/id_rsa",
            f"write:{tag}",
            "shmget",
            "semget",
        ],
        env={"TMPDIR": "/tmp", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        timeout=60,
        check=False,
    )
    os.unlink(tag)
    got = json.loads(done.stdout)["probe"]
    assert got[f"read:{world['home']}/.ssh/id_rsa"] == 0 and got[f"write:{tag}"] == 0
    assert got["shmget"] == 0 and got["semget"] == 0  # made, and removed again by the probe


@pytest.fixture()
def listener() -> Iterator[int]:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        yield srv.getsockname()[1]


def test_a_script_without_declared_egress_cannot_connect(world: dict[str, Path], listener: int) -> None:
    assert probe(world, f"connect:{listener}")["probe"] == {f"connect:{listener}": errno.EPERM}
    # Positive control: the skill that declares egress reaches the same listener.
    assert probe(world, f"connect:{listener}", skill="net")["probe"] == {f"connect:{listener}": 0}


def test_its_bundle_tmpdir_bash_and_node_still_work(world: dict[str, Path]) -> None:
    bash = serve(world, "probe", "probe.sh")["result"]
    assert (bash["status"], bash["stdout"]) == ("ok", "bundle-data\n"), bash
    if "node" not in limits.find_interpreters():
        pytest.skip("no node on the fixed path")
    node = serve(world, "probe", "probe.js")["result"]
    assert (node["status"], node["stdout"]) == ("ok", "bundle-data\n"), node


NO_LANDLOCK = (sys.executable, str(HERE / "no_landlock.py"))


def test_a_kernel_without_landlock_runs_no_script_and_says_why(world: dict[str, Path]) -> None:
    found = nobody_python()
    assert found is not None
    out = serve(world, "probe", "probe.py", "write:$TMPDIR/x", wrap=(found[0], str(HERE / "no_landlock.py")))
    assert out.get("refused") == "sandbox-unavailable" and "SKILL_MCP_UNCONFINED" in out["detail"], out
    state = next(s for s in out["states"] if s["script"] == "probe.py")
    assert state["state"] == "blocked" and "sandbox-unavailable" in state["detail"]


def test_the_owner_may_opt_out_on_such_a_kernel_and_is_warned(world: dict[str, Path]) -> None:
    found = nobody_python()
    assert found is not None
    out = serve(
        world,
        "probe",
        "probe.py",
        f"read:{world['home']}/.ssh/id_rsa",
        wrap=(found[0], str(HERE / "no_landlock.py")),
        env={"SKILL_MCP_UNCONFINED": "1"},
    )
    assert out["result"]["status"] == "ok", out
    assert "sandbox-unavailable" in out["stderr"] and "WITHOUT a kernel sandbox" in out["stderr"]
    # Unconfined, as the warning says: the key the sandbox keeps from every other run is read.
    assert json.loads(out["result"]["stdout"])["probe"] == {f"read:{world['home']}/.ssh/id_rsa": 0}


def test_a_hosted_server_ignores_the_opt_out(world: dict[str, Path]) -> None:
    found = nobody_python()
    assert found is not None
    grant = json.dumps([{"skill": "probe", "script": "probe.py"}])
    out = serve(
        world,
        "probe",
        "probe.py",
        wrap=(found[0], str(HERE / "no_landlock.py")),
        env={"SKILL_MCP_UNCONFINED": "1", "MCP_SKILLS_PATH": str(world["skills"]), "MCP_SKILL_RUN": grant},
    )
    assert out.get("refused") == "sandbox-unavailable", out
