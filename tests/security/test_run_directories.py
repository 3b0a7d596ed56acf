"""Standalone runs share no directory: a server killed mid-run leaves its run's TMPDIR behind,
and the next server removes it before its first run (runner.rundirs), so a later script - under a
root server, another run of the same unprivileged user - cannot read what the killed run left.
"""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.security.conftest import server_env
from tests.security.harness import announced, open_session, server_params

pytestmark = pytest.mark.slow  # every case starts a server or a CLI subprocess


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_servers_run_directory_is_gone_before_the_next_servers_first_run(sec_root: Path) -> None:
    secret = "left-behind-" + secrets.token_hex(6)
    pidfile = sec_root.parent / "out" / "leave.pid"
    with open_session(server_params([sec_root], server_env()), read_timeout=60) as session:
        args = ["leave", str(pidfile), "60", secret]
        token = session.preview("sec", "scripts/probe.py", args)[1]["confirmToken"]
        session.portal.start_task_soon(
            session.client.call_tool,
            "skill_run",
            {"skill": "sec", "script": "scripts/probe.py", "args": args, "confirmToken": token},
        )
        info = announced(pidfile)
        os.kill(info["ppid"], signal.SIGKILL)
        wait_until(lambda: not _alive(info["ppid"]), "the server to die", 15)
        wait_until(lambda: not _alive(info["pid"]), "the script to die with it", 15)
    left = Path(info["TMPDIR"])
    # Positive control: the killed server could not remove its run's directory, secret inside.
    assert (left / "secret").read_text() == secret
    with open_session(server_params([sec_root], server_env()), read_timeout=60) as session:
        out = session.probe("rundirs", str(left))["out"]
    assert str(left) not in out["seen"] and secret not in out["secrets"], out
    # The sandbox refuses even the listing of the directory beside its own, and reading by name.
    assert out["listed"] == "EACCES"
    assert not left.exists()  # and the next server removed it before its first run
