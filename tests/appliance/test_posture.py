"""Who runs as whom, with what: the script, the server and the launcher.

Each test is named after the denial it proves and carries a positive control, so that a
probe that could not observe anything fails instead of passing.
"""

from __future__ import annotations

import pytest

from tests.appliance.conftest import Appliance

pytestmark = pytest.mark.appliance

KEPT = (1 << 5) | (1 << 6) | (1 << 7)  # KILL, SETGID, SETUID


def test_script_runs_as_script_uid_without_groups_caps_or_new_privileges(appliance: Appliance) -> None:
    reply = appliance.run("id")
    assert reply["ok"], reply
    out = reply["out"]
    assert (out["uid"], out["euid"], out["gid"], out["groups"]) == (10002, 10002, 10002, [])
    assert {out[k] for k in ("CapEff", "CapPrm", "CapInh", "CapAmb")} == {"0000000000000000"}
    assert out["NoNewPrivs"] == "1"
    # Positive control: the probe did read real /proc data (the launcher, uid 0, holds caps).
    assert out["launcher"]["Uid"].split()[0] == "0"
    assert int(out["launcher"]["CapEff"], 16) == KEPT
    assert out["cwd"] == "/skills/probe"
    assert out["TMPDIR"].startswith("/run/skill-mcp/scratch/")
    assert {"HTTP_PROXY", "HTTPS_PROXY"} <= set(out["env"])


def test_server_holds_no_capabilities_and_launcher_keeps_only_what_it_needs(appliance: Appliance) -> None:
    me = appliance.request({"op": "self"})
    assert (me["uid"], me["gid"], me["groups"]) == (10001, 10001, [])
    assert {me["status"][k] for k in ("CapEff", "CapPrm", "CapInh", "CapAmb")} == {"0000000000000000"}
    assert me["status"]["NoNewPrivs"] == "1"
    # Positive control: the launcher really holds SETUID/SETGID/KILL (and only those).
    launcher = appliance.run("id")["out"]["launcher"]
    assert int(launcher["CapEff"], 16) == int(launcher["CapPrm"], 16) == KEPT
    hello = appliance.request({"op": "hello"})
    assert hello["fence"] is True and hello["ok"] is True


def test_launcher_server_and_script_hold_an_empty_bounding_set(appliance: Appliance) -> None:
    # NET_ADMIN (and SETPCAP) were needed at boot only: after the ruleset is loaded the launcher
    # empties the bounding set, so no process in the container can ever be granted them again.
    out = appliance.run("id")["out"]
    assert int(out["launcher"]["CapBnd"], 16) == 0 and int(out["CapBnd"], 16) == 0
    assert int(appliance.request({"op": "self"})["status"]["CapBnd"], 16) == 0
    # Positive control: the launcher still holds (and uses) SETUID/SETGID/KILL in its own sets.
    assert int(out["launcher"]["CapEff"], 16) == int(out["launcher"]["CapPrm"], 16) == KEPT
    assert out["uid"] == 10002


def test_launcher_without_setpcap_boots_and_says_the_bounding_set_is_kept(image: str) -> None:
    # SETPCAP is in the documented flags; older flag sets without it still boot (no-new-privileges
    # stops every gain), and the boot log says the bounding set could not be emptied.
    app = Appliance(image, caps=("SETUID", "SETGID", "KILL", "NET_ADMIN"))
    try:
        out = app.run("id")["out"]
        assert int(out["launcher"]["CapBnd"], 16) >> 12 & 1  # NET_ADMIN stays in the bounding set
        assert int(out["CapEff"], 16) == 0 and out["NoNewPrivs"] == "1"
    finally:
        app.close()
    assert '"bounding_emptied": false' in app.stderr() and "SETPCAP" in app.stderr()


@pytest.mark.parametrize("target", ["server", "launcher"])
@pytest.mark.parametrize("what", ["environ", "mem"])
def test_script_cannot_read_server_or_launcher_proc_files(appliance: Appliance, target: str, what: str) -> None:
    pid = appliance.request({"op": "self"})["pid"] if target == "server" else 1
    denied = appliance.run("read", f"/proc/{pid}/{what}")
    assert denied["out"]["read"] in {"EACCES", "EPERM"}, denied
    # Positive control: the same probe reads its own environ.
    assert appliance.run("read", "/proc/self/environ")["out"]["read"] == "ok"


@pytest.mark.parametrize("target", ["server", "launcher"])
def test_script_cannot_ptrace_server_or_launcher(appliance: Appliance, target: str) -> None:
    pid = appliance.request({"op": "self"})["pid"] if target == "server" else 1
    out = appliance.run("ptrace", str(pid))["out"]
    assert out["target"] == "EPERM"
    assert out["own_child"] == "EPERM"  # stronger now: the run's seccomp filter refuses ptrace itself


@pytest.mark.parametrize("target", ["server", "launcher"])
def test_script_cannot_signal_server_or_launcher(appliance: Appliance, target: str) -> None:
    pid = appliance.request({"op": "self"})["pid"] if target == "server" else 1
    out = appliance.run("kill", str(pid))["out"]
    assert out["target"] == "EPERM"
    assert out["own_child"] == "ok"
    assert appliance.request({"op": "hello"})["ok"]  # and the server is still there


def test_script_cannot_write_skills_directory(appliance: Appliance) -> None:
    denied = appliance.run("write", "/skills/probe/planted.txt")["out"]["write"]
    assert denied in {"EROFS", "EACCES"}
    # Positive control: the probe can write where it is meant to (its run directory, and only there).
    scratch = appliance.run("scratch")["out"]
    assert scratch["wrote"].pop(f"{scratch['TMPDIR']}/note") == "ok" and set(scratch["wrote"].values()) == {"EACCES"}


def test_scratch_directory_and_leftovers_are_gone_after_the_run(appliance: Appliance) -> None:
    first = appliance.run("scratch")
    assert first["ok"] and first["sweep"]["scratchRemoved"] is True
    written = list(first["out"]["wrote"])
    scratch_dir = first["out"]["TMPDIR"]
    # Positive control: the file in the run directory existed during the run (the probe wrote it);
    # the sandbox refused the others.
    assert first["out"]["wrote"][f"{scratch_dir}/note"] == "ok"
    after = appliance.run("exists", scratch_dir, *written)["out"]
    assert after == {p: False for p in [scratch_dir, *written]}


def test_ruleset_cannot_be_changed_from_the_server_uid(appliance: Appliance) -> None:
    flush = appliance.request({"op": "exec", "argv": ["/usr/sbin/nft", "flush", "ruleset"]})
    assert flush["rc"] != 0 and "Operation not permitted" in flush["stderr"]
    # Positive control and proof the ruleset is still in force: the broker still reports the
    # fence, and the probe's direct connection (see test_egress) is still dropped.
    assert appliance.request({"op": "hello"})["fence"] is True
    listing = appliance.request({"op": "exec", "argv": ["/usr/sbin/nft", "list", "ruleset"]})
    assert listing["rc"] != 0  # the server cannot even read it: no NET_ADMIN at all


def test_without_net_admin_scripts_are_refused_and_boot_still_serves(image: str) -> None:
    app = Appliance(image, caps=("SETUID", "SETGID", "KILL"))
    try:
        hello = app.request({"op": "hello"})
        assert hello["ok"] and hello["fence"] is False and "NET_ADMIN" in hello["fenceDetail"]
        refused = app.run("id")
        assert refused["ok"] is False and refused["reason"] == "fence-unavailable"
    finally:
        app.close()
    # Positive control: the same image with NET_ADMIN runs the same probe.
    app = Appliance(image)
    try:
        assert app.run("id")["ok"] is True
    finally:
        app.close()


def test_launcher_refuses_to_boot_without_setuid(image: str) -> None:
    app = Appliance(image, caps=("SETGID", "KILL", "NET_ADMIN"))
    code = app.close()
    assert code == 3
    assert "missing capabilities" in app.stderr()


def test_ruleset_is_in_force_after_boot(appliance: Appliance) -> None:
    import json
    import subprocess

    def nft(*args: str) -> subprocess.CompletedProcess[str]:
        # docker exec runs as root with the container's capability set (NET_ADMIN included):
        # an observer outside the launcher, reading the kernel's tables.
        return subprocess.run(
            ["docker", "exec", appliance.name, "/usr/sbin/nft", "-j", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    assert appliance.request({"op": "hello"})["fence"] is True  # booted, ruleset loaded
    listing = nft("list", "table", "inet", "skill_mcp")
    assert listing.returncode == 0, listing.stderr
    items = json.loads(listing.stdout)["nftables"]
    chains = [i["chain"] for i in items if "chain" in i]
    assert [(c["hook"], c["policy"]) for c in chains] == [("output", "drop")]
    assert sum(1 for i in items if "rule" in i) >= 8
    # Positive control: the same observer is told when a table is not there.
    assert nft("list", "table", "inet", "no_such_table").returncode != 0
