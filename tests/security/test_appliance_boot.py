"""Boot invariants of the appliance: what must hold in every container the image starts.

Capabilities of every process, the ruleset in force and immutable from inside, no setuid or
setgid file, users and uids as designed, no compiler, the launcher's imports on its allowlist -
checked on the running product (the real server behind the real launcher).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.security.appliance import PROXY_UID, SCRIPT_UID, SERVER_UID, AppServer

pytestmark = pytest.mark.appliance
ZERO = "0000000000000000"
LAUNCHER_CAPS = (1 << 5) | (1 << 6) | (1 << 7)  # CAP_KILL, CAP_SETGID, CAP_SETUID


def _image_run(image: str, *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", argv[0], image, *argv[1:]],
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_capability_sets_of_every_process(app: AppServer) -> None:
    app.session.probe("echo", "warm")  # a run has come and gone: its processes must be gone too
    procs = app.procs()
    by_uid = {p["uid"]: p for p in procs}
    assert set(by_uid) == {0, SERVER_UID}, procs  # at rest: the launcher and the server, nothing else
    launcher = by_uid[0]
    assert int(launcher["CapEff"], 16) == int(launcher["CapPrm"], 16) == LAUNCHER_CAPS
    server = by_uid[SERVER_UID]
    assert server["CapEff"] == server["CapPrm"] == ZERO and server["NoNewPrivs"] == "1"
    script = app.session.probe("id")["out"]  # positive control: the script is a third, capability-less uid
    assert script["uid"] == SCRIPT_UID and script["CapEff"] == ZERO


def test_ruleset_is_loaded_with_default_drop(app: AppServer) -> None:
    proc = app.exec("nft", "-j", "list", "ruleset")
    assert proc.returncode == 0, proc.stderr
    chains = [item["chain"] for item in json.loads(proc.stdout)["nftables"] if "chain" in item]
    output = [c for c in chains if c.get("hook") == "output" and c.get("table") == "skill_mcp"]
    assert output and output[0]["policy"] == "drop"


@pytest.mark.parametrize("as_uid", [SCRIPT_UID, SERVER_UID])
def test_ruleset_cannot_be_changed_from_inside(as_uid: int, app: AppServer) -> None:
    if as_uid == SCRIPT_UID:
        out = app.session.probe("cmd", "nft", "flush", "ruleset")["out"]
        rc, stderr = out["rc"], out.get("stderr", "") + out.get("error", "")
    else:
        proc = app.exec(
            "setpriv", f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups", "nft", "flush", "ruleset"
        )
        rc, stderr = proc.returncode, proc.stderr.decode(errors="replace")
    assert rc != 0 and ("Operation not permitted" in stderr or "EPERM" in stderr or rc is None), stderr
    # Positive control: the ruleset is still there, unchanged, and still drops.
    assert '"policy": "drop"' in app.exec("nft", "-j", "list", "ruleset").stdout.decode().replace('":"', '": "')


def test_no_setuid_or_setgid_file_in_the_image(image: str) -> None:
    found = _image_run(image, "find", "/", "-xdev", "-type", "f", "-perm", "/6000")
    assert found.returncode == 0 and found.stdout.decode().split() == []
    executables = _image_run(image, "find", "/usr/bin", "-type", "f", "-perm", "/0111")
    assert len(executables.stdout.split()) > 10  # positive control: find does see files and modes


def test_users_and_uids_as_designed(image: str, app: AppServer) -> None:
    passwd = _image_run(image, "getent", "passwd", "skillmcp-server", "skillmcp-script", "skillmcp-proxy")
    rows = {line.split(":")[0]: line.split(":") for line in passwd.stdout.decode().splitlines()}
    assert {name: int(row[2]) for name, row in rows.items()} == {
        "skillmcp-server": SERVER_UID,
        "skillmcp-script": SCRIPT_UID,
        "skillmcp-proxy": PROXY_UID,
    }
    assert all(row[6] == "/usr/sbin/nologin" for row in rows.values())
    assert app.procs() and {p["uid"] for p in app.procs()} <= {0, SERVER_UID}


def test_no_compiler_in_the_image(image: str) -> None:
    found = _image_run(image, "/bin/sh", "-c", "for c in gcc cc c++ g++ clang tcc as ld; do command -v $c; done; true")
    assert found.stdout.decode().split() == []
    assert _image_run(image, "/bin/sh", "-c", "command -v python3").stdout.strip()  # positive control


def test_launcher_imports_only_its_allowlist_in_the_image(image: str) -> None:
    code = (
        "import sys, json; import skill_mcp_launcher.boot, skill_mcp_launcher.broker, skill_mcp_launcher.checks; "
        "print(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))"
    )
    proc = _image_run(image, "/opt/skill-mcp/bin/python", "-I", "-c", code)
    assert proc.returncode == 0, proc.stderr
    tops = set(json.loads(proc.stdout))
    # Debian ships /usr/lib/python3.11/sitecustomize.py (it tries apport, which is not installed).
    first_party = ("skill_mcp", "skill_mcp_launcher", "sitecustomize")
    libraries = ("prctl", "psutil")  # the two chosen libraries: capabilities and prctl, processes
    foreign = {
        m
        for m in tops
        if m not in sys.stdlib_module_names and m not in first_party + libraries and not m.startswith("_")
    }
    assert foreign == set(), foreign
    assert "skill_mcp_launcher" in tops  # positive control: the launcher was really imported
    assert set(libraries) <= tops  # and the image holds the two libraries it imports
