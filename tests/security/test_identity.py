"""Identity and environment inside a standalone script (the real server, run as root, drops it).

What a script is: the script uid, no supplementary groups, no capabilities, NoNewPrivs, a
setuid binary gains nothing; what it is handed: exactly the allowlist plus the owner's grants,
never a loader variable, and no descriptor but its stdio.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from skill_mcp.reasons import ProblemReason
from tests.security.conftest import GRANTED, LOADERS, SECRET
from tests.security.harness import Session, script_account

pytestmark = pytest.mark.slow  # slow: a root server per module dropping scripts to the suite's user

ZERO_CAPS = "0000000000000000"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop happens only when the server is root")


@root_only
def test_script_runs_as_script_uid_never_root(server: Session) -> None:
    account = script_account()
    assert account is not None
    out = server.probe("id")["out"]
    assert out["uid"] == out["euid"] == account.pw_uid != 0
    assert out["gid"] == account.pw_gid != 0
    assert out["ppid"] != 1  # positive control: the probe really reported on itself (its parent is the server)


@root_only
def test_script_has_no_supplementary_groups(server: Session) -> None:
    assert server.probe("id")["out"]["groups"] == []
    assert os.getgroups() or True  # the server's own groups are irrelevant: the drop clears them


@root_only
def test_script_holds_no_capabilities(server: Session) -> None:
    out = server.probe("id")["out"]
    assert (out["CapEff"], out["CapPrm"], out["CapInh"], out["CapAmb"]) == (ZERO_CAPS,) * 4
    # Positive control: the server's own process (root) does hold capabilities to lose.
    with open(f"/proc/{out['ppid']}/status", encoding="ascii") as fh:
        server_caps = next(line.split()[1] for line in fh if line.startswith("CapEff:"))
    assert server_caps != ZERO_CAPS


def test_script_runs_with_no_new_privs(server: Session) -> None:
    assert server.probe("id")["out"]["NoNewPrivs"] == "1"


@pytest.fixture
def setuid_id(sec_root: Path) -> Iterator[Path]:
    """A root-owned setuid copy of id(1) inside the probe's own skill (the one place besides the
    runtime its sandbox lets it execute from), removed after."""
    if os.geteuid() != 0:
        pytest.skip("making a setuid-root binary needs root")
    target = sec_root / "sec" / f"id-suid-{os.getpid()}"
    shutil.copy("/usr/bin/id", target)
    target.chmod(0o4755)
    try:
        yield target
    finally:
        target.unlink()


@root_only
def test_setuid_binary_gains_nothing(server: Session, setuid_id: Path) -> None:
    account = script_account()
    assert account is not None
    out = server.probe("setuid", str(setuid_id))["out"]
    assert out["euid_after_exec"] == str(account.pw_uid)
    # Positive control: the same uid without no-new-privileges does become root through it,
    # so the binary is really setuid and the mount honours it.
    proc = subprocess.run(
        ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", str(setuid_id), "-u"],
        capture_output=True,
        timeout=20,
        check=True,
    )
    assert proc.stdout.decode().strip() == "0"


def test_environment_is_exactly_the_allowlist_plus_grants(server: Session) -> None:
    env = server.probe("env")["out"]["env"]
    allowed = {"PATH", "HOME", "LANG", "TZ", "TMPDIR", "SKILL_OUTPUT_DIR", "MCP_DATA_DIR", "SEC_GRANTED"}
    assert set(env) <= allowed, set(env) - allowed
    assert env["SEC_GRANTED"] == GRANTED  # positive control: the granted variable arrives, value intact
    assert {"PATH", "HOME", "TMPDIR"} <= set(env)


def test_server_secret_never_reaches_the_script_environment(server: Session) -> None:
    env = server.probe("env")["out"]["env"]
    assert "SEC_SERVER_SECRET" not in env and SECRET not in "".join(env.values())
    assert env.get("SEC_GRANTED") == GRANTED


def test_declared_but_ungranted_variable_not_handed(server: Session) -> None:
    env = server.probe("env")["out"]["env"]
    assert "SEC_DECLARED_ONLY" not in env  # declared by the skill, absent from the owner's grant row
    assert env.get("SEC_GRANTED") == GRANTED


@pytest.mark.parametrize("loader", LOADERS)
def test_loader_variable_can_never_be_granted(loader: str, server: Session) -> None:
    # Declared by the skill, granted by the owner, set in the server's environment: still never handed.
    env = server.probe("env")["out"]["env"]
    assert loader not in env
    problems = server.call("skill_list", {})[1].get("problems", [])
    assert any(p["reason"] == ProblemReason.ENV_FORBIDDEN and loader in p["detail"] for p in problems), problems
    assert env.get("SEC_GRANTED") == GRANTED


def test_script_descriptors_are_only_its_stdio(server: Session) -> None:
    fds = server.probe("id")["out"]["fds"]
    assert sorted(int(fd) for fd in fds) == [0, 1, 2], fds
    assert fds["0"] == "/dev/null"  # stdin is /dev/null; 1 and 2 are the capture pipes
    assert fds["1"].startswith("pipe:") and fds["2"].startswith("pipe:")
