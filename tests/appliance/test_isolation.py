"""Runs share nothing: what one run leaves anywhere it can write is gone before the next starts.

One skill's run (``probe``) tries to plant files in its scratch directory, /tmp, /dev/shm,
/var/tmp and /run, a POSIX message queue, System V shared memory, a semaphore set and a message
queue, a directory it locked itself out of, and to squat the run directory names it could guess.
Its sandbox (``skill_mcp.confine``) lets only the scratch directory's plants land: every shared
place and every IPC object is refused outright, and these tests assert that stronger denial
where the plant used to land. The next run, of another skill (``quiet``), looks for all of it, by
name and by owner. The clean-up behind it is ``skill_mcp_launcher.isolation``.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from tests.appliance.conftest import Appliance, probe_plan
from tests.helpers import wait_until

pytestmark = pytest.mark.appliance

SCRATCH_ROOT = "/run/skill-mcp/scratch"
# Where the launcher removes the script uid's leftovers (skill_mcp_launcher.isolation.SHARED_WRITABLE).
CLEANED = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run")
# The server uid's independent view: every entry of uid 10002 it can see, and every IPC object.
SERVER_SCAN = (
    "import json, os\nfound = []\n"
    "for top in ('/tmp', '/dev/shm', '/dev/mqueue', '/var/tmp', '/run'):\n"
    " for root, dirs, files in os.walk(top):\n"
    "  for name in dirs + files:\n"
    "   p = os.path.join(root, name)\n"
    "   try:\n    st = os.lstat(p)\n   except OSError:\n    continue\n"
    "   if st.st_uid == 10002 or st.st_gid == 10002: found.append(p)\n"
    "for kind in ('shm', 'msg', 'sem'):\n"
    " rows = open(f'/proc/sysvipc/{kind}').read().splitlines()\n"
    " head = rows[0].split()\n"
    " for row in rows[1:]:\n"
    "  cols = row.split()\n"
    "  if '10002' in (cols[head.index('uid')], cols[head.index('cuid')]): found.append(f'{kind}#{cols[1]}')\n"
    "print(json.dumps(found))\n"
)


def _server_view(app: Appliance) -> list[str]:
    """The scan as the server uid, through ``docker exec`` (the stand-in server answers one request
    at a time, so it cannot be asked while a run is in progress)."""
    proc = subprocess.run(["docker", "exec", "--user", "10001:10001", app.name, "/usr/bin/python3", "-c", SERVER_SCAN],
                          capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(proc.stdout))


def _planted(reply: dict, tag: str) -> dict:
    assert reply.get("ok"), reply
    out = reply["out"]
    tmp = out["TMPDIR"]
    # Positive controls: the plants in the run's own directory landed.
    for path in (f"{tmp}/note", f"{tmp}/locked-{tag}"):
        assert out["wrote"][path] == "ok", (path, out["wrote"])
    # The sandbox refuses every shared place and every IPC object before anything is left there.
    for path in (f"/tmp/plant-{tag}", f"/tmp/locked-{tag}", f"/dev/shm/plant-{tag}", f"/run/plant-{tag}"):
        assert out["wrote"][path] == "EACCES", (path, out["wrote"])
    assert out["wrote"][f"/var/tmp/plant-{tag}"] in ("EACCES", "EROFS")  # EROFS: the read-only root, first
    assert out["mq"] == "EPERM" and max(out["ipc"].values()) == -1 and out["ipc_errno"] == "EPERM", out
    return out


def test_a_run_sees_nothing_an_earlier_run_of_another_skill_left_fifty_times(appliance: Appliance) -> None:
    scratch_dirs = set()
    for i in range(50):
        out = _planted(appliance.run("plant", str(i)), str(i))
        # No name under the scratch root can be listed, guessed or squatted by the script uid.
        assert out["list_scratch_root"] == "EACCES"
        assert set(out["squat"].values()) == {"EACCES"}, out["squat"]
        seen = appliance.run("seek", str(i), skill="quiet")
        assert seen["ok"] and seen["sweep"] == {"remaining": 0, "scratchRemoved": True}, seen
        assert seen["out"]["found"] == [] and seen["out"]["scratch_empty"] is True, seen["out"]
        scratch_dirs |= {out["TMPDIR"], seen["out"]["TMPDIR"]}
    assert len(scratch_dirs) == 100  # every run had a directory of its own
    assert all(d.startswith(f"{SCRATCH_ROOT}/run-") and len(d.rsplit("-", 1)[1]) == 32 for d in scratch_dirs)
    # And nothing is left after the last one either, as the server uid sees it.
    assert _server_view(appliance) == []


def test_the_server_side_scan_sees_a_plant_while_its_run_is_alive(image: str) -> None:
    """Positive control for the scans above: the server uid's scan does see a file of the script
    uid in a shared place (one root puts there, since the sandbox refuses the script), and while
    the planting run is alive its plant is in its own run directory and nowhere else."""
    app = Appliance(image)
    try:
        assert app.request({"op": "hello"})["ok"]
        subprocess.run(["docker", "exec", "--user", "10002:10002", app.name, "/usr/bin/touch", "/tmp/plant-by-exec"],
                       capture_output=True, timeout=30, check=True)
        assert "/tmp/plant-by-exec" in _server_view(app)  # the scan sees the script uid's files
        subprocess.run(["docker", "exec", app.name, "/usr/bin/rm", "-f", "/tmp/plant-by-exec"], capture_output=True,
                       timeout=30, check=True)
        assert app.proc.stdin is not None
        app.proc.stdin.write((json.dumps(probe_plan("plant", "7", "60")) + "\n").encode())
        app.proc.stdin.flush()
        wait_until(lambda: _exists_in(app.name, f"{SCRATCH_ROOT}/*/note", glob=True), "the run's own plant", 30)
        assert _server_view(app) == []  # while it runs, nothing of it in any shared place
    finally:
        app.close()


def test_a_run_that_fills_every_writable_place_cannot_stop_the_next_one(appliance: Appliance) -> None:
    filled = appliance.run("fill")
    assert filled["ok"], filled
    out = filled["out"]
    # Positive control: the run directory really ran out of space; the shared places were refused.
    assert out.pop("/tmp")["stopped"] == out.pop("/dev/shm")["stopped"] == "EACCES", filled["out"]
    assert {v["stopped"] for v in out.values()} == {"ENOSPC"}, filled["out"]
    after = appliance.run("scratch", skill="quiet")
    assert after["ok"], after
    wrote = after["out"]["wrote"]
    assert wrote.pop(f"{after['out']['TMPDIR']}/note") == "ok" and set(wrote.values()) == {"EACCES"}, after


def test_the_script_uid_can_write_only_where_the_launcher_cleans(appliance: Appliance) -> None:
    out = appliance.run("writable")["out"]
    places = set(out["writable"])
    assert out["TMPDIR"] in places  # positive control: the walk does see a writable place
    outside = sorted(p for p in places - {out["TMPDIR"]} if not p.startswith(CLEANED))
    assert outside == []


def test_a_run_cannot_leave_a_key_in_the_kernel_keyring(appliance: Appliance) -> None:
    # The user keyring outlives a uid's processes and is not cleaned by the launcher: Docker's
    # default seccomp profile refuses the keyring calls (docs/deploy.md, "Runs share nothing").
    out = appliance.run("keyring")["out"]
    assert out == {"add_key": "EPERM", "getpid": "ok"}  # getpid through the same syscall(): the control


@pytest.mark.timeout(300)
def test_leftovers_of_an_earlier_life_are_removed_at_boot(image: str) -> None:
    """A container killed mid-run (no sweep ran) leaves files in a persistent place; the next
    container that boots on the same volume removes them before its first run."""
    volume = f"skill-mcp-test-vartmp-{uuid.uuid4().hex[:8]}"
    mount = ["-v", f"{volume}:/var/tmp"]
    try:
        first = Appliance(image, extra=mount)
        try:
            assert first.request({"op": "hello"})["ok"]
            assert first.proc.stdin is not None
            # The sandbox refuses the script /var/tmp, so root plants a file of the script uid there,
            # as a run of an older image (or a deployment without the sandbox) could have left it.
            subprocess.run(["docker", "exec", "--user", "10002:10002", first.name, "/usr/bin/touch",
                            "/var/tmp/plant-3"], capture_output=True, timeout=30, check=True)
            first.proc.stdin.write((json.dumps(probe_plan("plant", "3", "60")) + "\n").encode())
            first.proc.stdin.flush()
            wait_until(lambda: _exists_in(first.name, "/var/tmp/plant-3"), "the planted file", 30)  # positive control
            subprocess.run(["docker", "kill", first.name], capture_output=True, timeout=30, check=True)
        finally:
            first.close()
        second = Appliance(image, extra=mount)
        try:
            seen = second.run("seek", "3", skill="quiet")
            assert seen["ok"] and seen["out"]["found"] == [], seen
        finally:
            second.close()
    finally:
        subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True, timeout=60, check=False)


def _exists_in(container: str, path: str, glob: bool = False) -> bool:
    if glob:  # a pattern: python's glob as root in the container, never a shell
        code = f"import glob, sys; sys.exit(0 if glob.glob({path!r}) else 1)"
        return subprocess.run(["docker", "exec", container, "/usr/bin/python3", "-c", code], capture_output=True,
                              timeout=30, check=False).returncode == 0
    return subprocess.run(["docker", "exec", container, "/usr/bin/test", "-e", path], capture_output=True,
                          timeout=30, check=False).returncode == 0
