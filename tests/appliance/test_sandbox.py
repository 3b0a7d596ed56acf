"""The appliance: every run in the kernel sandbox the broker builds from its own decision.

Real image, documented flags; the probe runs as the script uid. Each denial beside its
legitimate neighbour. The last test starts the image under a seccomp profile that makes the
Landlock calls fail with ENOSYS, as on a kernel without Landlock: the appliance then runs nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.appliance.conftest import Appliance

pytestmark = pytest.mark.appliance


def test_script_cannot_read_another_skill(appliance: Appliance) -> None:
    assert appliance.run("read", "/skills/quiet/SKILL.md")["out"] == {"read": "EACCES"}
    assert appliance.run("read", "/skills/probe/SKILL.md")["out"]["read"] == "ok"  # its own skill
    assert appliance.run("read", "/etc/passwd")["out"]["read"] == "ok"  # the runtime


def test_script_cannot_write_outside_its_run_directory(appliance: Appliance) -> None:
    for path in ("/tmp/sandboxed", "/dev/shm/sandboxed", "/run/sandboxed", "/run/skill-mcp/sandboxed"):
        assert appliance.run("write", path)["out"] == {"write": "EACCES"}, path
    # /var/tmp is on the read-only root: the kernel says so (EROFS) before it asks Landlock.
    assert appliance.run("write", "/var/tmp/sandboxed")["out"]["write"] in ("EACCES", "EROFS")
    own = appliance.run("scratch")["out"]
    assert own["wrote"][f"{own['TMPDIR']}/note"] == "ok"  # its run directory, which is also HOME


def test_script_cannot_make_system_v_or_posix_ipc(appliance: Appliance) -> None:
    out = appliance.run("plant", "5")["out"]
    assert out["ipc"] == {"shm": -1, "msg": -1, "sem": -1} and out["ipc_errno"] == "EPERM"
    assert out["mq"] == "EPERM"
    assert out["wrote"][f"{out['TMPDIR']}/note"] == "ok"  # the same run wrote its own directory


def test_script_cannot_connect_to_anything_but_the_proxy_port(appliance: Appliance) -> None:
    # Landlock refuses at once (EACCES), before nftables would drop the packet.
    for target in ("127.0.0.1:9", "127.0.0.1:8080", "10.0.0.1:443"):
        out = appliance.run("net", "direct", target)["out"]
        assert out["errno"] == "EACCES", (target, out)
    # Positive control: the proxy's port is reached (the proxy answers the CONNECT itself).
    reached = appliance.run("net", "connect", "not-declared.example:443")["out"]
    assert reached["connect"].startswith("HTTP/1."), reached


def test_script_cannot_bind_a_tcp_port(appliance: Appliance) -> None:
    out = appliance.run("rebind", "allowed.test", "0", "2")["out"]  # the probe tries to listen first
    assert out["listen"] == "EACCES" and out["listener_hits"] == 0, out
    # Positive control: the same run still reaches a declared host through the proxy.
    assert out["fetch"] == {"status": 200}, out


@pytest.mark.timeout(300)
def test_an_appliance_whose_kernel_cannot_confine_runs_nothing(image: str, tmp_path: Path) -> None:
    profile = tmp_path / "no-landlock.json"
    profile.write_text(
        json.dumps(
            {
                "defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [
                    {
                        "names": ["landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"],
                        "action": "SCMP_ACT_ERRNO",
                        "errnoRet": 38,
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    app = Appliance(image, extra=["--security-opt", f"seccomp={profile}"])
    try:
        hello = app.request({"op": "hello"})
        assert hello["ok"] and hello["sandbox"] is False and "Landlock" in hello["sandboxDetail"], hello
        refused = app.run("id")
        assert refused["ok"] is False and refused["reason"] == "sandbox-unavailable", refused
    finally:
        app.close()
    # Positive control: the same image under the default profile confines and runs.
    app = Appliance(image)
    try:
        hello = app.request({"op": "hello"})
        assert hello["sandbox"] is True, hello
        assert app.run("id")["ok"]
    finally:
        app.close()
