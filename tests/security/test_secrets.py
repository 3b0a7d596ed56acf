"""Secrets and introspection: a standalone script cannot reach into the server.

The server here is root and the script runs as the suite's script user, so these prove the
cross-uid boundary the standalone fence draws when it starts as root. The same-uid case (the
wiped environment block and PR_SET_DUMPABLE=0) is proven with a root reader below - the wipe
must hold even against a reader the kernel does not stop - and in tests/fence with a server
running as ``nobody``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.security.conftest import SECRET
from tests.security.harness import Session, announced, last_json
from tests.serve import SKILL_MCP

pytestmark = pytest.mark.slow  # slow: a root server per module dropping scripts to the suite's user

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the cross-uid boundary exists only when the server is root")


def _server_pid(server: Session) -> int:
    return int(server.probe("id")["out"]["ppid"])


@root_only
@pytest.mark.parametrize("what", ["environ", "mem", "maps", "auxv"])
def test_script_cannot_read_server_proc_file(what: str, server: Session) -> None:
    pid = _server_pid(server)
    assert server.probe("read", f"/proc/{pid}/{what}")["out"]["read"] == "EACCES"
    # Positive control: its own entry opens (mem at offset 0 is unmapped: the read says EIO, after
    # the open the server's entry never got past).
    assert server.probe("read", f"/proc/self/{what}")["out"]["read"] in ("ok", "EIO")


@root_only
def test_script_cannot_list_server_descriptors(server: Session) -> None:
    pid = _server_pid(server)
    assert server.probe("list", f"/proc/{pid}/fd")["out"]["list"] == "EACCES"
    assert server.probe("list", "/proc/self/fd")["out"]["list"] == "ok"


@root_only
def test_script_cannot_ptrace_server(server: Session) -> None:
    out = server.probe("ptrace", str(_server_pid(server)))["out"]
    assert out["target"] == "EPERM"
    # The sandbox's filter refuses ptrace outright, even of the script's own child...
    assert out["own_child"] == "EPERM"
    # ...and the positive control is the same probe outside the sandbox, which may trace its child.
    assert _unconfined_probe("ptrace", "999999999")["own_child"] == "ok"  # a pid that does not exist: ESRCH


@root_only
def test_script_cannot_signal_server(server: Session) -> None:
    out = server.probe("kill", str(_server_pid(server)))["out"]
    assert out["target"] == out["target0"] == "EPERM"
    assert out["own_child"] == "ok"


@root_only
def test_script_cannot_attach_to_signal_or_read_the_shim_waiting_for_the_next_run(
    server: Session, sec_root: Path
) -> None:
    # The shim for the next run waits as root until that run's configuration arrives. It is started
    # after a run and by any call that passes the checks: here a preview made while the probe runs.
    pidfile = sec_root.parent / "out" / "shim-probe.pid"
    args = ["shim", str(pidfile)]
    token = server.preview("sec", "scripts/probe.py", args)[1]["confirmToken"]
    pending = server.portal.start_task_soon(
        server.client.call_tool,
        "skill_run",
        {"skill": "sec", "script": "scripts/probe.py", "args": args, "confirmToken": token},
    )
    announced(pidfile)  # the probe started
    assert server.preview("sec", "scripts/probe.py", ["echo", "next"])[1]["status"] == "confirmation-required"
    result = pending.result(timeout=60)
    out = last_json(result.structured_content["stdout"])
    assert out["found"] is not None  # positive control: it is there, a sibling of the script
    assert (out["ptrace"], out["read"], out["kill"], out["kill0"]) == ("EPERM", "EACCES", "EPERM", "EPERM")
    assert out["own_child"] == "EPERM"  # the sandbox refuses ptrace itself; see test_script_cannot_ptrace_server
    assert server.probe("echo", "still-runs")["out"] == {"argv": ["still-runs"]}  # it serves the next run


def test_no_secret_in_any_process_command_line(server: Session) -> None:
    out = server.probe("cmdlines", SECRET.encode().hex())["out"]
    assert out["hits"] == []
    # Positive control: the probe finds a string that is on a command line (its own mode name).
    control = server.probe("cmdlines", b"cmdlines".hex())["out"]
    assert control["hits"] and control["seen"] >= 1


def test_server_environ_block_is_wiped_even_for_a_root_reader(server: Session) -> None:
    pid = _server_pid(server)
    with open(f"/proc/{pid}/environ", "rb") as fh:
        block = fh.read()
    assert SECRET.encode() not in block
    assert b"SEC_SERVER_SECRET" not in block
    # Positive control: the secret was in the server's environment (the script is granted a
    # neighbour variable from the same environment, so the server did read it).
    env = server.probe("env")["out"]["env"]
    assert "SEC_GRANTED" in env


def test_server_secret_not_on_server_command_line(server: Session) -> None:
    pid = _server_pid(server)
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        cmdline = fh.read()
    assert SECRET.encode() not in cmdline and SKILL_MCP.encode() in cmdline.split(b"\0")  # the server's own


def test_script_dumps_no_core(server: Session) -> None:
    out = server.probe("abort")["out"]
    assert out["signal"] == 6  # positive control: the child really died of SIGABRT
    assert out["core_dumped"] is False and out["core_files"] == []
    assert server.probe("id")["out"]["core"] == [0, 0]


def _unconfined_probe(*args: str) -> dict[str, Any]:
    """The suite's probe run directly by the test (no server, no sandbox): the positive control."""
    from tests.security.conftest import PROBE

    done = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, timeout=60, check=True)
    return dict(last_json(done.stdout.decode()))
