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
import time
import uuid

import pytest

from tests.appliance.conftest import Appliance, probe_plan
from tests.helpers import wait_until

pytestmark = pytest.mark.appliance

SCRATCH_ROOT = "/run/skill-mcp/scratch"
# The broker's sweep after a run whose clean-up is complete.
CLEAN = {"remaining": 0, "scratchRemoved": True, "cleanup": "done"}
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
    proc = subprocess.run(
        ["docker", "exec", "--user", "10001:10001", app.name, "/usr/bin/python3", "-c", SERVER_SCAN],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
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
        assert seen["ok"] and seen["sweep"] == CLEAN, seen
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
        subprocess.run(
            ["docker", "exec", "--user", "10002:10002", app.name, "/usr/bin/touch", "/tmp/plant-by-exec"],
            capture_output=True,
            timeout=30,
            check=True,
        )
        assert "/tmp/plant-by-exec" in _server_view(app)  # the scan sees the script uid's files
        subprocess.run(
            ["docker", "exec", app.name, "/usr/bin/rm", "-f", "/tmp/plant-by-exec"],
            capture_output=True,
            timeout=30,
            check=True,
        )
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
            subprocess.run(
                ["docker", "exec", "--user", "10002:10002", first.name, "/usr/bin/touch", "/var/tmp/plant-3"],
                capture_output=True,
                timeout=30,
                check=True,
            )
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
        return (
            subprocess.run(
                ["docker", "exec", container, "/usr/bin/python3", "-c", code],
                capture_output=True,
                timeout=30,
                check=False,
            ).returncode
            == 0
        )
    return (
        subprocess.run(
            ["docker", "exec", container, "/usr/bin/test", "-e", path], capture_output=True, timeout=30, check=False
        ).returncode
        == 0
    )


# --- clean-up that an adversary shapes: depth, volume, count; and memory ---------------------------

KEY = "key-of-the-probe-skill-0123456789"


def _truthful(sweep: dict) -> None:
    """A sweep says ``done`` only when it is: no process left, the run directory gone."""
    assert sweep["cleanup"] in ("done", "running", "failed"), sweep
    if sweep["cleanup"] == "done":
        assert sweep == CLEAN, sweep
    else:
        assert sweep["scratchRemoved"] is False or sweep["remaining"] > 0 or sweep["cleanup"] == "failed", sweep
        assert sweep.get("cleanupDetail"), sweep


def _admitted(app: Appliance, mode: str, *args: str, skill: str = "quiet", tries: int = 120) -> dict:
    """Run, asking again (bounded) while the broker refuses with ``cleanup-pending``; every refusal
    must report the pending clean-up truthfully."""
    reply: dict = {}
    for _ in range(tries):
        reply = app.run(mode, *args, skill=skill)
        if reply.get("ok") or reply.get("reason") != "cleanup-pending":
            return reply
        _truthful(reply["data"]["sweep"])
        time.sleep(1)
    return reply


def test_script_cannot_stop_the_cleanup_with_a_deep_tree_and_the_next_run_finds_no_cached_key(image: str) -> None:
    app = Appliance(image, env={"PROBE_TOKEN": KEY})
    try:
        first = app.run("deep")
        assert first.get("ok"), first
        out = first["out"]
        tmp = out["TMPDIR"]
        # Positive controls: the 1,100-level tree and the cached key really were made in the run's
        # directory; /tmp and /dev/shm take them too unless a sandbox refuses the write.
        assert out["deep"][tmp] == "ok" and out["cached"][tmp] == "ok", out
        assert {out["deep"]["/tmp"], out["deep"]["/dev/shm"]} <= {"ok", "EACCES", "EPERM", "EROFS"}, out
        _truthful(first["sweep"])
        cached = [f"{top}/key-cache" for top in (tmp, "/tmp", "/dev/shm")]
        seen = _admitted(app, "census", *cached)
        assert seen.get("ok"), seen
        assert seen["sweep"] == CLEAN
        assert all(v in ("ENOENT", "EACCES") for v in seen["out"]["read"].values()), seen["out"]["read"]
        assert KEY not in json.dumps(seen["out"])
        # And the clean-up still works for every run after: a plant is gone before the next seek.
        planted = _planted(app.run("plant", "5"), "5")
        assert planted["TMPDIR"] != tmp
        after = _admitted(app, "seek", "5")
        assert after["ok"] and after["out"]["found"] == [], after
        assert _server_view(app) == []
    finally:
        app.close()


def test_script_cannot_take_the_next_runs_space_with_a_deep_tree_beside_40_mib(image: str) -> None:
    app = Appliance(image)
    try:
        first = app.run("deepfill", "40")
        assert first.get("ok") and first["out"]["mib"] == 40 and first["out"]["deep"] == "ok", first  # control
        _truthful(first["sweep"])
        seen = _admitted(app, "census", first["out"]["TMPDIR"])
        assert seen.get("ok"), seen
        # /run is a 64 MiB tmpfs: with the 40 MiB still there, fewer than 24 would be free.
        assert seen["out"]["free_mib"] >= 56, seen["out"]
        assert seen["out"]["entries"] == [] and seen["out"]["read"][first["out"]["TMPDIR"]] in ("ENOENT", "EACCES")
    finally:
        app.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("files", "script"), [(400_000, "scripts/probe.py"), (1_100_000, "scripts/long.py")], ids=["400000", "1100000"]
)
def test_script_cannot_outlast_the_cleanup_with_many_files(image: str, files: int, script: str) -> None:
    """400,000 files; and 1,100,000, whose removal outlasts the broker's wait after the run (the
    next requests are refused with cleanup-pending until it is done, here and not by chance)."""
    app = Appliance(image)
    try:
        first = app.run("manyfiles", str(files), script=script)
        assert first.get("ok") and first["out"]["made"] == files, first  # positive control
        _truthful(first["sweep"])
        seen = _admitted(app, "census")
        assert seen.get("ok"), seen
        # Nothing of the earlier run: no entry, no process of the uid (its clean-up included).
        assert seen["out"]["entries"] == [] and seen["out"]["others"] == [], seen["out"]
        assert seen["sweep"] == CLEAN
    finally:
        app.close()


@pytest.mark.timeout(600)
def test_script_cannot_get_the_server_oom_killed_with_16_children_of_40_mb(image: str) -> None:
    """Under the documented 512 MiB (no swap), 16 x 40 MB is more than the container has: the OOM
    killer must pick the script's processes (oom_score_adj 1000), never the real server."""
    import anyio

    from tests.appliance.served import PROBE, grant, run_confirmed, served

    async def go() -> None:
        async with served(image, grant(PROBE), extra=("--memory", "512m", "--memory-swap", "512m")) as client:
            hog = await run_confirmed(client, ["memhog", "16", "40", "5"])
            assert hog.get("status") in ("ok", "error", "killed"), hog  # a result with a status
            ends = json.loads(hog["stdout"])["ends"] if hog.get("status") == "ok" else None
            # Positive control: memory really ran out, and it was the script's children that died.
            assert ends is None or ends["killed"] > 0, hog
            # The server keeps serving: an ordinary run afterwards succeeds.
            after = await run_confirmed(client, ["id"])
            assert after.get("status") == "ok", after
            assert json.loads(after["stdout"])["uid"] == 10002

    anyio.run(go)
