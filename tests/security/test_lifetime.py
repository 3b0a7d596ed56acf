"""Lifetime and resources of a standalone run: the call always returns, within bounds.

Timeouts use ``scripts/short.py`` (the probe, declared with ``timeout: 2``) so a case costs a
few seconds. The appliance half (tests/security/test_appliance.py) proves the one thing the
standalone spawner cannot: a process that left the script's session is killed too.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from skill_mcp.reasons import Refusal
from tests.helpers import alive, eventually, wait_until
from tests.security.conftest import no_script_processes, server_env
from tests.security.harness import Session, announced, kill_uid, last_json, open_session, procs_of_uid, server_params

pytestmark = pytest.mark.slow  # slow: a root server per module, and cases that start their own

SHORT = "scripts/short.py"
BOUND_S = 2 + 2 + 5 + 3  # timeout + TERM grace + KILL wait + slack: the call always returns by then


def _timed(server: Session, *args: str) -> tuple[dict, float]:
    started = time.monotonic()
    err, out = server.run("sec", SHORT, list(args))
    assert not err, out
    return out, time.monotonic() - started


def _control(server: Session) -> None:
    assert server.probe("echo", "still-runs")["out"] == {"argv": ["still-runs"]}


def test_timeout_ends_a_sleeper_and_the_call_returns(server: Session) -> None:
    out, took = _timed(server, "sleep", "60")
    assert out["status"] == "timeout" and took < BOUND_S
    ok, took = _timed(server, "sleep", "0.1")  # positive control: within its timeout it finishes
    assert ok["status"] == "ok"


def test_sigterm_ignoring_script_is_killed_after_the_grace(server: Session) -> None:
    out, took = _timed(server, "ignore_term")
    assert out["status"] == "timeout" and took < BOUND_S
    assert "ignoring" in out["stdout"]  # output before the kill is kept
    _control(server)


def test_self_stopping_script_is_killed(server: Session) -> None:
    out, took = _timed(server, "selfstop")
    assert out["status"] == "timeout" and took < BOUND_S
    _control(server)


def test_cpu_spin_is_stopped_by_the_timeout(server: Session) -> None:
    out, took = _timed(server, "spin")
    assert out["status"] == "timeout" and took < BOUND_S
    _control(server)


def test_background_child_in_the_group_is_killed(server: Session) -> None:
    child = server.probe("background")["out"]["child"]
    wait_until(lambda: not alive(child), f"background child {child} to be killed", 5)
    _control(server)


@pytest.mark.parametrize("mode", ["doublefork", "setsid"])
def test_session_escapee_does_not_hold_the_call(mode: str, server: Session, script_uid: int | None) -> None:
    """Standalone residual risk (docs/fence.md, SECURITY.md): a process that made a session of its own
    may outlive the run. The call must still return at once; the appliance kills it (test_appliance)."""
    started = time.monotonic()
    out = server.probe(mode, "hold")["out"]
    assert time.monotonic() - started < BOUND_S
    pid = out.get("grandchild") or out.get("daemon")
    assert pid and out.get("sid", pid) != out.get("own_sid")  # it really left the script's session
    if script_uid is not None:
        kill_uid(script_uid)  # the documented standalone gap: the suite cleans up what the fence cannot
    _control(server)


def test_escapee_holding_stdout_does_not_hold_the_call(server: Session, script_uid: int | None) -> None:
    started = time.monotonic()
    err, out = server.run("sec", SHORT, ["doublefork", "hold"])
    assert not err and time.monotonic() - started < BOUND_S
    assert any("held its output" in note for note in out.get("notes", [])), out
    if script_uid is not None:
        kill_uid(script_uid)
    _control(server)


@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC applies when scripts run under a uid of their own")
def test_fork_bomb_is_stopped_by_nproc(server: Session) -> None:
    out = server.probe("forkbomb", "3")["out"]
    assert out["eagain"] > 0 and out["started"] < 300
    _control(server)


@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC applies when scripts run under a uid of their own")
def test_thread_bomb_is_stopped_by_nproc(server: Session) -> None:
    out = server.probe("threadbomb", "5000")["out"]
    assert out["error"] and out["started"] < 300
    _control(server)


def test_hundred_runs_accumulate_no_zombies(server: Session, script_uid: int | None) -> None:
    server_pid = int(server.probe("id")["out"]["ppid"])
    for _ in range(100):
        out = server.probe("zombie")["out"]
        assert not alive(out["zombie"])
    children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == server_pid]
    # The server reaped every script it started; what is left is the one shim waiting for the next run.
    assert children == _shims_of(server_pid) and len(children) == 1 and alive(children[0]), children
    no_script_processes(script_uid)


def _ppid(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_output_flood_is_capped_at_one_mebibyte_per_stream(server: Session) -> None:
    err, out = server.run("sec", "scripts/probe.py", ["flood", str(50 * 1024 * 1024)])
    assert not err and out["status"] == "ok"
    assert len(out["stdout"]) == len(out["stderr"]) == 1024 * 1024
    assert out["truncated"] == {"stdout": True, "stderr": True}
    assert out["droppedBytes"] >= 2 * 49 * 1024 * 1024
    _control(server)


def test_hostile_output_bytes_come_back_as_valid_text(server: Session) -> None:
    err, out = server.run("sec", "scripts/probe.py", ["weird"])
    assert not err and out["status"] == "ok"
    text = out["stdout"]
    assert "\ufffd" in text and "\x1b[31m" in text and "\x00nul" in text and text.endswith("no-newline-at-end")
    assert json.loads(text.split("\n")[1]) == {"weird": True}
    _control(server)


def test_scratch_disk_fill_stops_at_the_file_size_limit(server: Session) -> None:
    out = server.probe("diskfill", "100")["out"]
    assert out["fill"] == "EFBIG" and out["mib"] <= 64
    assert not os.path.exists(out["tmp"])  # the private TMPDIR is removed after the run
    ok = server.probe("diskfill", "2")["out"]  # positive control: a small write succeeds
    assert ok["fill"] == "ok" and not os.path.exists(ok["tmp"])


def test_descriptor_exhaustion_stops_at_nofile(server: Session) -> None:
    out = server.probe("fds")["out"]
    assert out["fds"] == "EMFILE" and out["opened"] < 300
    _control(server)


def test_second_concurrent_run_is_refused_busy(server: Session, sec_root: Path) -> None:
    pidfile = sec_root.parent / "out" / "busy.pid"
    args = ["pidfile", str(pidfile), "3"]
    err, first = server.preview("sec", "scripts/probe.py", args)
    assert not err
    long_run = server.portal.start_task_soon(
        server.client.call_tool,
        "skill_run",
        {"skill": "sec", "script": "scripts/probe.py", "args": args, "confirmToken": first["confirmToken"]},
    )
    announced(pidfile)  # the first run started
    err, out = server.run("sec", "scripts/probe.py", ["echo", "second"])
    assert err and out["reason"] == Refusal.BUSY
    result = long_run.result(timeout=30)
    assert not result.is_error and result.structured_content["status"] == "ok"
    _control(server)  # the lock was released


@pytest.mark.parametrize(
    "how",
    [
        "SIGKILL",  # PR_SET_PDEATHSIG in the exec shim
        "SIGTERM",  # SIGTERM stops serving like EOF
        "stdin-EOF",
    ],
)
def test_server_killed_mid_run_leaves_no_orphan(how: str, sec_root: Path, script_uid: int | None) -> None:
    pidfile = sec_root.parent / "out" / f"killed-{how}.pid"
    with open_session(server_params([sec_root], server_env()), read_timeout=60) as session:
        args = ["pidfile", str(pidfile), "60"]
        token = session.preview("sec", "scripts/probe.py", args)[1]["confirmToken"]
        pending = session.portal.start_task_soon(
            session.client.call_tool,
            "skill_run",
            {"skill": "sec", "script": "scripts/probe.py", "args": args, "confirmToken": token},
        )
        info = announced(pidfile)
        assert alive(info["pid"])  # positive control: the script is running when the server goes
        if how == "stdin-EOF":
            pending.cancel()
        else:
            os.kill(info["ppid"], getattr(signal, how))
            wait_until(lambda: not alive(info["ppid"]), "the server to exit", 15)
        try:
            orphan_dead = eventually(lambda: not alive(info["pid"]), 10)
        finally:
            if script_uid is not None and not orphan_dead:
                kill_uid(script_uid)
    assert orphan_dead, f"the script (pid {info['pid']}) outlived the server ({how})"
    # A script whose server was SIGKILLed is re-parented to this machine's PID 1, which need not
    # reap: an unreaped zombie runs nothing and holds nothing but its pid, so it is not a survivor.
    assert script_uid is None or not [p for p in procs_of_uid(script_uid) if p["state"] != "Z"]


def _shims_of(server_pid: int) -> list[int]:
    """The server's children that are exec shims (waiting for a run: a script would have exec'd)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == server_pid and b"_exec_shim.py" in argv:
            found.append(int(entry))
    return found


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "stdin-EOF"])
def test_server_stopped_leaves_no_waiting_shim(how: str, sec_root: Path) -> None:
    with open_session(server_params([sec_root], server_env()), read_timeout=60) as session:
        server_pid = int(session.probe("id")["out"]["ppid"])
        wait_until(lambda: _shims_of(server_pid), "the shim for the next run", 10)
        shims = _shims_of(server_pid)
        assert len(shims) == 1 and alive(shims[0])  # positive control: one waits, never more
        if how != "stdin-EOF":
            os.kill(server_pid, getattr(signal, how))
            wait_until(lambda: not alive(server_pid), "the server to exit", 15)
    # SIGKILL: the parent-death signal ends it; SIGTERM and stdin EOF: the closers kill and reap it.
    assert eventually(lambda: not alive(shims[0]), 10), f"the waiting shim (pid {shims[0]}) outlived the server"


_ = last_json  # re-exported helper, used by the appliance half
