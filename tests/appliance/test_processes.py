"""Process bounds: fork bombs, detached grandchildren, sweeps, zombies and capture caps."""

from __future__ import annotations

import subprocess

import pytest

from tests.appliance.conftest import Appliance

pytestmark = pytest.mark.appliance

MiB = 1024 * 1024


def _script_procs(appliance: Appliance) -> list[dict]:
    return [p for p in appliance.request({"op": "procs"})["procs"] if p["uid"] == 10002]


def _zombies(appliance: Appliance) -> list[dict]:
    return [p for p in appliance.request({"op": "procs"})["procs"] if p["state"] == "Z"]


def test_fork_bomb_is_stopped_by_nproc_and_server_keeps_answering(appliance: Appliance) -> None:
    reply = appliance.run("forkbomb", "3", timeout_s=20)
    assert reply["ok"], reply
    # Positive control: the bomb really ran into the limit (fork returned EAGAIN), so it was
    # NPROC that stopped it, not a probe that never forked.
    assert reply["out"]["eagain"] > 0 and reply["out"]["started"] > 0
    assert reply["sweep"]["remaining"] == 0
    assert _script_procs(appliance) == []
    assert appliance.request({"op": "hello"})["ok"] is True


def test_detached_grandchild_is_dead_after_the_call(appliance: Appliance) -> None:
    first = appliance.run("doublefork", "hold")
    out = first["out"]
    # Positive control: the grandchild was alive, in a session of its own, when the script ended.
    assert out["alive"] is True and out["sid"] != out["own_sid"]
    assert appliance.run("exists", f"/proc/{out['grandchild']}")["out"] == {f"/proc/{out['grandchild']}": False}
    assert _script_procs(appliance) == []


def test_fifty_runs_leave_no_script_processes_and_no_zombies(appliance: Appliance) -> None:
    for _ in range(50):
        reply = appliance.run("linger")
        assert reply["ok"] and reply["out"]["child"] > 0  # each run left a child behind it
        assert reply["sweep"]["remaining"] == 0
    # Independent of the broker's own count: the server uid's view of /proc.
    seen = appliance.request({"op": "procs"})["procs"]
    assert {p["uid"] for p in seen} >= {0, 10001}  # positive control: the scan sees processes
    assert [p for p in seen if p["uid"] == 10002] == []
    assert _zombies(appliance) == []


def test_flood_is_capped_at_one_mebibyte_per_stream(appliance: Appliance) -> None:
    size = 50 * 1000 * 1000
    reply = appliance.request(_flood(size))
    result = reply["result"]
    assert len(result["stdout"].encode()) == MiB and len(result["stderr"].encode()) == MiB
    assert result["truncated_stdout"] is True and result["truncated_stderr"] is True
    assert result["dropped_bytes"] >= 2 * (size - MiB)
    # Positive control: a small output is neither cut nor flagged.
    small = appliance.request(_flood(1000))["result"]
    assert small["truncated_stdout"] is False and small["stdout"].startswith("x" * 1000)
    assert small["dropped_bytes"] == 0


def _flood(size: int) -> dict:
    from tests.appliance.conftest import probe_plan

    return probe_plan("flood", str(size), timeout_s=30)


def test_timeout_kills_the_script_and_the_call_returns(appliance: Appliance) -> None:
    reply = appliance.run("forkbomb", "60", timeout_s=2)
    assert reply["ok"] and reply["result"]["status"] == "timeout"
    assert reply["result"]["duration_ms"] < 20_000
    assert _script_procs(appliance) == []


def test_system_v_ipc_objects_do_not_outlive_the_run(appliance: Appliance) -> None:
    made = appliance.run("ipc", "create")["out"]
    assert made["shm"] == made["msg"] == -1  # the run's sandbox refuses System V IPC outright
    # The sweep behind it, as defence in depth: an object of the script uid made outside any run
    # (docker exec, as an older image's run could have) is seen by a run, and gone after it.
    code = "import ctypes; print(ctypes.CDLL(None).shmget(0, 4096, 0o1000 | 0o600))"
    subprocess.run(
        ["docker", "exec", "--user", "10002:10002", appliance.name, "/usr/bin/python3", "-c", code],
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert appliance.run("ipc", "list")["out"]["mine"] != []  # positive control: the listing sees it
    assert appliance.run("ipc", "list")["out"] == {"mine": []}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["sleep", "silent"])  # silent: no output wakes the launcher, only the signal
def test_stop_signal_ends_a_run_in_progress_instead_of_holding_shutdown(image: str, mode: str) -> None:
    import json
    import subprocess
    import time

    from tests.appliance.conftest import probe_plan

    app = Appliance(image)
    try:
        assert app.request({"op": "hello"})["ok"]
        assert app.proc.stdin is not None
        app.proc.stdin.write((json.dumps(probe_plan(mode, "120", timeout_s=30)) + "\n").encode())
        app.proc.stdin.flush()
        # Bounded wait until the launcher has started the script (its pid shows in /proc as
        # the script uid), so the signal lands while the run is in progress.
        scan = (
            "import os\nfor p in os.listdir('/proc'):\n if p.isdigit():\n  try: c=open(f'/proc/{p}/cmdline','rb')"
            ".read()\n  except OSError: continue\n  if b'probe.py\\x00" + mode + "' in c: print('running')\n"
        )
        deadline = time.monotonic() + 30
        seen = ""
        while time.monotonic() < deadline and "running" not in seen:
            seen = subprocess.run(
                ["docker", "exec", app.name, "/usr/bin/python3", "-c", scan],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout
        assert "running" in seen  # positive control: the run really was in progress
        started = time.monotonic()
        subprocess.run(["docker", "kill", "--signal", "TERM", app.name], capture_output=True, timeout=30, check=True)
        app.proc.wait(timeout=60)
        assert time.monotonic() - started < 20  # not the 120 s the script wanted
    finally:
        app.close()
    assert '"timed_out": true' in app.stderr()


def test_server_death_mid_run_ends_the_script_at_once(image: str) -> None:
    """The broker watches the server during a run. The stand-in server starts a
    60 s sleeper (timeout 30 s) and exits; the container must end well before that timeout."""
    import json
    import subprocess

    from tests.appliance.conftest import probe_plan

    app = Appliance(image)
    try:
        plan = probe_plan("sleep", "60", timeout_s=30)
        started = app.request({"op": "run-and-die", "run": plan["run"]})
        # Positive control: the script really was running when the server died.
        assert started["ok"] and started["script_pids"], started
        code = app.proc.wait(timeout=10)  # before the fix: ~30 s, the script's own timeout
    except subprocess.TimeoutExpired:
        code = None
    finally:
        app.close()
    events = [json.loads(line) for line in app.stderr().splitlines() if line.startswith('{"ts"')]
    runs = [e for e in events if e.get("component") == "launcher" and e.get("event") == "run"]
    assert code is not None, f"the container outlived its server; launcher log: {app.stderr()}"
    assert runs and runs[-1]["server_gone"] is True and runs[-1]["remaining"] == 0, runs
    assert runs[-1]["duration_ms"] < 10_000
    assert any(e.get("event") == "server-exited" for e in events)
