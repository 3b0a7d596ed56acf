"""Identity, secrets and lifetime in the appliance, through the real server and the SDK client.

The script runs as uid 10002 under the launcher's broker; the server is uid 10001, non-dumpable,
with its environment block wiped; the launcher is PID 1 (root, SETUID/SETGID/KILL only). After
every case ``conftest.after_each`` asserts the server still answers and zero processes of the
script uid remain in the container - the sweep standalone mode cannot do.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.helpers import wait_until
from tests.security.appliance import (
    PROBE_SKILL,
    SCRIPT_UID,
    SECRET,
    SERVER_UID,
    AppServer,
    host_status,
    open_appliance,
)

pytestmark = pytest.mark.appliance
ZERO = "0000000000000000"
PROXY_ENV = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}


def _server_ns_pid(app: AppServer) -> int:
    return int(host_status(app.server_pid())["NSpid"])


def _control(app: AppServer) -> None:
    assert app.session.probe("echo", "ok")["out"] == {"argv": ["ok"]}


# --- identity and environment -------------------------------------------------------------------


def test_script_is_script_uid_without_groups_capabilities_or_new_privileges(app: AppServer) -> None:
    out = app.session.probe("id")["out"]
    assert out["uid"] == out["euid"] == SCRIPT_UID and out["groups"] == []
    assert (out["CapEff"], out["CapPrm"], out["CapInh"], out["CapAmb"]) == (ZERO,) * 4
    assert out["NoNewPrivs"] == "1"
    assert out["uid"] != SERVER_UID  # positive control: a different uid from the server that asked


def test_appliance_environment_is_exactly_the_allowlist(app: AppServer) -> None:
    env = app.session.probe("env")["out"]["env"]
    env.pop("LC_CTYPE", None) if env.get("LC_CTYPE") == "C.UTF-8" else None  # PEP 538: python sets it itself
    assert set(env) <= {"PATH", "HOME", "LANG", "TZ", "TMPDIR", "SKILL_OUTPUT_DIR", *PROXY_ENV}, env
    assert "SEC_SERVER_SECRET" not in env and SECRET not in "".join(env.values())
    assert env["HTTP_PROXY"] == "http://127.0.0.1:8888"  # positive control: the broker's own variables


def test_appliance_script_descriptors_are_only_its_stdio(app: AppServer) -> None:
    fds = app.session.probe("id")["out"]["fds"]
    assert sorted(int(fd) for fd in fds) == [0, 1, 2] and fds["0"] == "/dev/null"


# --- secrets and introspection ------------------------------------------------------------------


@pytest.mark.parametrize("what", ["environ", "mem"])
@pytest.mark.parametrize("target", ["server", "launcher"])
def test_script_cannot_read_proc_file_of(target: str, what: str, app: AppServer) -> None:
    pid = _server_ns_pid(app) if target == "server" else 1
    assert app.session.probe("read", f"/proc/{pid}/{what}")["out"]["read"] == "EACCES"
    assert app.session.probe("read", "/proc/self/environ")["out"]["read"] == "ok"  # positive control


@pytest.mark.parametrize("target", ["server", "launcher"])
def test_script_cannot_list_descriptors_of(target: str, app: AppServer) -> None:
    pid = _server_ns_pid(app) if target == "server" else 1
    assert app.session.probe("list", f"/proc/{pid}/fd")["out"]["list"] == "EACCES"
    assert app.session.probe("list", "/proc/self/fd")["out"]["list"] == "ok"


@pytest.mark.parametrize("target", ["server", "launcher"])
def test_script_cannot_ptrace_or_signal(target: str, app: AppServer) -> None:
    pid = str(_server_ns_pid(app) if target == "server" else 1)
    traced = app.session.probe("ptrace", pid)["out"]
    # The run's seccomp filter refuses ptrace itself (own child included); the uid already refused the target.
    assert traced["target"] == "EPERM" and traced["own_child"] == "EPERM"
    signalled = app.session.probe("kill", pid)["out"]
    assert signalled["target"] == signalled["target0"] == "EPERM" and signalled["own_child"] == "ok"


def test_no_secret_on_any_command_line_in_the_appliance(app: AppServer) -> None:
    assert app.session.probe("cmdlines", SECRET.encode().hex())["out"]["hits"] == []
    assert app.session.probe("cmdlines", b"cmdlines".hex())["out"]["hits"]  # positive control


def test_server_environ_block_wiped_and_server_non_dumpable(app: AppServer) -> None:
    pid = app.server_pid()
    with open(f"/proc/{pid}/environ", "rb") as fh:  # the host's root: no kernel check stops this reader
        assert SECRET.encode() not in fh.read()
    # Non-dumpable: the kernel hands the process's /proc files to root, not to its own uid.
    assert os.stat(f"/proc/{pid}/environ").st_uid == 0 and host_status(pid)["uid"] == SERVER_UID
    assert host_status(pid)["NoNewPrivs"] == "1"


def test_appliance_script_dumps_no_core(app: AppServer) -> None:
    out = app.session.probe("abort")["out"]
    assert out["signal"] == 6 and out["core_dumped"] is False and out["core_files"] == []


# --- lifetime and resources ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["doublefork", "setsid"])
def test_session_escapee_is_dead_after_the_call(mode: str, app: AppServer) -> None:
    out = app.session.probe(mode)["out"]
    assert out.get("grandchild") or out.get("daemon")  # positive control: the escape happened
    assert app.of_uid(SCRIPT_UID) == []  # and the broker's sweep ended it before the call returned


def test_escapee_holding_stdout_is_dead_and_the_call_returns(app: AppServer) -> None:
    err, out = app.session.run(PROBE_SKILL, "scripts/short.py", ["doublefork", "hold"])
    assert not err and out["status"] in ("ok", "error", "killed", "timeout")
    assert app.of_uid(SCRIPT_UID) == []


def test_appliance_fork_bomb_is_stopped_by_nproc(app: AppServer) -> None:
    out = app.session.probe("forkbomb", "3")["out"]
    assert out["eagain"] > 0
    _control(app)


def test_memory_balloon_is_stopped_by_the_address_space_limit(app: AppServer) -> None:
    out = app.session.probe("balloon", "256")["out"]  # 4 GiB asked for
    assert out["balloon"] == "MemoryError"
    assert app.session.probe("balloon", "2")["out"]["balloon"] == "allocated"  # positive control


def test_appliance_timeout_ends_a_sleeper(app: AppServer) -> None:
    err, out = app.session.run(PROBE_SKILL, "scripts/short.py", ["sleep", "60"])
    assert not err and out["status"] == "timeout"
    _control(app)


def test_appliance_output_flood_is_capped(app: AppServer) -> None:
    err, out = app.session.run(PROBE_SKILL, "scripts/probe.py", ["flood", str(20 * 1024 * 1024)])
    assert not err and len(out["stdout"]) == len(out["stderr"]) == 1024 * 1024
    assert out["truncated"] == {"stdout": True, "stderr": True}


def _kill_server_mid_run(image: str, peers: dict, rebind_dns: dict, script: str, within_s: float) -> None:
    name = f"skill-mcp-sec-kill-{os.getpid()}-{script.rsplit('/', 1)[-1][:5]}"
    with open_appliance(image, name, network=peers["network"], dns=rebind_dns["ip"]) as app:
        args = ["sleep", "60"]
        token = app.session.preview(PROBE_SKILL, script, args)[1]["confirmToken"]
        app.session.portal.start_task_soon(
            app.session.client.call_tool,
            "skill_run",
            {"skill": PROBE_SKILL, "script": script, "args": args, "confirmToken": token},
        )
        wait_until(lambda: app.of_uid(SCRIPT_UID), "the script to start", 30)
        script_pids = [p["pid"] for p in app.of_uid(SCRIPT_UID)]  # host pids: positive control, it runs
        os.kill(app.server_pid(), signal.SIGKILL)
        wait_until(
            lambda: not any(os.path.exists(f"/proc/{p}") for p in script_pids),
            "every script process to end after the server died",
            within_s,
        )
        # The launcher exits with the server; the container is gone as well.
        wait_until(
            lambda: (
                subprocess.run(["docker", "inspect", name], capture_output=True, timeout=30, check=False).returncode
                != 0
            ),
            "the container to end",
            30,
        )


def test_appliance_server_killed_mid_run_leaves_no_orphan(image: str, peers: dict, rebind_dns: dict) -> None:
    # The broker watches the server's pidfd during a run and ends it at once.
    _kill_server_mid_run(image, peers, rebind_dns, "scripts/probe.py", within_s=10)  # probe.py: timeout 30 s


def test_appliance_orphan_of_a_killed_server_ends_by_its_timeout(image: str, peers: dict, rebind_dns: dict) -> None:
    # short.py's timeout is 3 s: the run ends by then and the launcher's sweep leaves nothing.
    _kill_server_mid_run(image, peers, rebind_dns, "scripts/short.py", within_s=3 + 2 + 5 + 5)
