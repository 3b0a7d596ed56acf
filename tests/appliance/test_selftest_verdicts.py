"""The self-test's verdicts, from tables of observations (no Docker needed).

A healthy observation set (shaped like what the agent collects in the image) must give an
all-held report and exit 0; each row below weakens one observation and must turn exactly
its property to FAILED (or not applicable), with a message that names the usual cause.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.selftest import observe, verdicts
from skill_mcp_launcher import selftest as launcher_selftest
from tests.appliance.conftest import REPO, run_flags

SHA = hashlib.sha256(b"skmcp-selftest-canary-" + b"a" * 32).hexdigest()
ZERO = "0000000000000000"
FIVE = (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 12)


def healthy() -> dict[str, Any]:
    caps = {k: ZERO for k in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd")}
    return {
        "facts": {
            "entry": {"effective": FIVE, "permitted": FIVE, "bounding": FIVE, "ambient": 0, "no_new_privs": True},
            "canary_sha256": SHA,
            "probe_host": "allowed.test",
            "probe_address": "172.18.0.2",
            "not_claimed": [],
        },
        "token": "0123456789abcdef",
        "listener_port": 40000,
        "listener_hits": 0,
        "leftovers": [],
        "root_processes_seen": 3,
        "server": {
            "uid": 10001,
            "status": {**caps, "NoNewPrivs": "1"},
            "dumpable": 0,
            "environ_bytes": 0,
            "sibling": {"environ": "EACCES", "mem": "EACCES"},
            "writes": {"/skills": "EROFS"},
            "nft": {"rc": 1},
            "canary_found_in": [],
        },
        "runs": {
            "posture": {
                "out": {
                    "uid": 10002,
                    "euid": 10002,
                    "caps": caps,
                    "bounding_prctl": [],
                    "no_new_privs": 1,
                    "setuid_root": "EPERM",
                    "nft_flush": {"rc": 1},
                    "nft_add": {"rc": 1},
                    "secret_sha256": SHA,
                    "skills_write": {"/skills": "EROFS"},
                }
            },
            "egress": {
                "out": {
                    "loopback": {"result": "TimeoutError"},
                    "dns": {"127.0.0.11": "EPERM"},
                    "proxy_undeclared": {"result": "http", "status": 403, "server": "tinyproxy/1.11.1"},
                    "proxy_declared": {"result": "http", "status": 200, "server": "SimpleHTTP/0.6"},
                    "direct_peer": {"result": "TimeoutError"},
                }
            },
            "nproc": {"out": {"forked": 62, "refused": "EAGAIN", "bound": 2048, "rlimit": [64, 64]}},
            "plant": {
                "out": {
                    "scratch": "/run/skill-mcp/scratch/x",
                    "shm_key": 1,
                    "sleeper": 99,
                    "wrote": {
                        "/run/skill-mcp/scratch/x/selftest-planted-0123456789abcdef": "ok",
                        "/tmp/selftest-planted-0123456789abcdef": "EACCES",
                    },
                }
            },
            "find": {"out": {"seen": {"/tmp/selftest-planted-0123456789abcdef": False}, "shm_seen": False}},
            "litter": {
                "out": {
                    "scratch": "/run/skill-mcp/scratch/y",
                    "files": 20000,
                    "levels": 1100,
                    "deep": {"/run/skill-mcp/scratch/y": "ok", "/tmp": "EACCES"},
                }
            },
            "after": {
                "out": {
                    "earlier_scratch": False,
                    "tmp_tree": False,
                    "own_entries": 0,
                    "others": [],
                    "scratch": "/run/skill-mcp/scratch/z",
                }
            },
            "confine": {
                "out": {
                    "reads": {"/skills/other/SKILL.md": "EACCES", "/run/skill-mcp/scratch": "EACCES"},
                    "writes": {"/tmp": "EACCES", "/var/tmp": "EACCES", "/dev/shm": "EACCES", "/run": "EACCES"},
                    "own_read": "ok",
                    "own_write": "ok",
                    "connect_other": {"result": "EACCES"},
                    "connect_proxy": {"result": "connected"},
                    "ipc": dict.fromkeys(("shmget", "msgget", "semget", "mq_open", "io_uring_setup"), "EPERM"),
                    "abstract": "EPERM",
                    "signal_server": "EPERM",
                }
            },
        },
    }


def states(obs: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {v.id: (v.state, v.detail) for v in verdicts.judge(obs)}


def test_a_healthy_deployment_holds_everything_and_exits_zero() -> None:
    found = verdicts.judge(healthy())
    assert {v.state for v in found} == {verdicts.HELD}
    assert verdicts.exit_code(found) == 0
    assert [v.id for v in found] == list(launcher_selftest.PROPERTIES)  # the launcher's choices match


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(obs: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = obs
        for key in parents:
            node = node[key]
        node[last] = value

    return apply


WEAKENED = [
    ("runs.posture.out.caps.CapBnd", "00000000000030e0", "capabilities", "CapBnd not empty"),
    ("runs.posture.out.caps.CapEff", "0000000000000080", "capabilities", "SETUID"),
    ("runs.posture.out.setuid_root", "ok", "capabilities", "setuid(0)"),
    ("server.status.CapBnd", "00000000000010e0", "capabilities", "the server (KILL SETGID SETUID NET_ADMIN)"),
    ("server.status.CapEff", "0000000000000020", "capabilities", "the server holds capabilities KILL"),
    ("runs.posture.out.uid", 10001, "uids", "share uid"),
    ("runs.posture.out.no_new_privs", 0, "no-new-privileges", "no-new-privileges is off"),
    ("facts.entry.bounding", FIVE | 1 << 19, "container-grant", "SYS_PTRACE"),
    ("facts.entry.no_new_privs", False, "container-grant", "--security-opt no-new-privileges"),
    ("runs.nproc.out", {"forked": 2048, "refused": None, "bound": 2048, "rlimit": [-1, -1]}, "nproc", "RLIMIT_NPROC"),
    ("server.dumpable", 1, "server-hardening", "dumpable"),
    ("server.sibling", {"environ": "ok", "mem": "ok"}, "server-hardening", "dumpable"),
    ("server.environ_bytes", 120, "server-hardening", "environment block"),
    ("server.environ_bytes", None, "server-hardening", "could not be read"),
    ("server.canary_found_in", ["memory"], "secret-separation", "found in its memory"),
    ("runs.posture.out.secret_sha256", None, "secret-separation", "did not receive"),
    ("runs.posture.out.skills_write", {"/skills": "ok"}, "skills-read-only", ":ro"),
    ("server.writes", {"/skills": "ok"}, "skills-read-only", "server: /skills"),
    ("runs.find.out.seen", {"/tmp/selftest-planted-0123456789abcdef": True}, "runs-isolated", "/tmp/selftest"),
    ("runs.find.out.shm_seen", True, "runs-isolated", "System V"),
    (
        "runs.find",
        {"isError": True, "reason": "spawn-failed", "detail": "File exists"},
        "runs-isolated",
        "could not start",
    ),
    ("runs.after.out.earlier_scratch", True, "cleanup-complete", "the earlier run's directory"),
    ("runs.after.out.tmp_tree", True, "cleanup-complete", "its tree in /tmp"),
    ("runs.after.out.own_entries", 3, "cleanup-complete", "3 entries in a fresh run directory"),
    ("runs.after.out.others", [412], "cleanup-complete", "processes of the script uid"),
    (
        "runs.after",
        {"isError": True, "reason": "cleanup-pending", "detail": "still running"},
        "cleanup-complete",
        "the clean-up did not finish",
    ),
    ("runs.litter.out.deep", {"/run/skill-mcp/scratch/y": "ENOSPC"}, "cleanup-complete", "nothing was proven"),
    ("runs.egress.out.loopback", {"result": "connected"}, "egress-default-deny", "direct connection"),
    ("listener_hits", 1, "egress-default-deny", "direct connection"),
    ("runs.egress.out.dns", {"127.0.0.11": "answered"}, "egress-default-deny", "DNS query"),
    ("runs.egress.out.proxy_undeclared", {"result": "http", "status": 200}, "egress-default-deny", "403"),
    ("runs.egress.out.direct_peer", {"result": "connected"}, "egress-default-deny", "172.18.0.2"),
    (
        "runs.egress.out.proxy_declared",
        {"result": "http", "status": 403, "server": "tinyproxy/1.11.1"},
        "egress-allowed-host",
        "not reached",
    ),
    ("runs.posture.out.nft_flush", {"rc": 0}, "ruleset-locked", "script flush"),
    ("server.nft", {"rc": 0}, "ruleset-locked", "server flush"),
    ("leftovers", [{"pid": 7, "name": "python3", "state": "S"}], "no-leftover-processes", "outlived"),
    ("root_processes_seen", 0, "no-leftover-processes", "hidepid"),
    ("runs.confine.out.reads", {"/skills/other/SKILL.md": "ok"}, "sandbox-files", "/skills/other/SKILL.md"),
    ("runs.confine.out.writes", {"/dev/shm": "ok"}, "sandbox-files", "/dev/shm"),
    ("runs.confine.out.own_write", "EACCES", "sandbox-files", "prove nothing"),
    ("runs.confine.out.connect_other", {"result": "connected"}, "sandbox-network", "other than the proxy"),
    ("runs.confine.out.connect_proxy", {"result": "EACCES"}, "sandbox-network", "prove"),
    ("runs.confine.out.ipc", {"shmget": "ok", "mq_open": "EPERM"}, "sandbox-ipc", "shmget"),
    ("runs.confine.out.abstract", "connected", "sandbox-scopes", "abstract socket"),
    ("runs.confine.out.signal_server", "ok", "sandbox-scopes", "signal"),
]


@pytest.mark.parametrize(("path", "value", "prop", "says"), WEAKENED, ids=[f"{r[2]}:{r[0]}" for r in WEAKENED])
def test_each_weakened_observation_fails_its_own_property(path: str, value: Any, prop: str, says: str) -> None:
    obs = healthy()
    _set(path, copy.deepcopy(value))(obs)
    got = states(obs)
    assert got[prop][0] == verdicts.FAILED and says in got[prop][1], got[prop]
    assert [p for p, (s, _) in got.items() if s == verdicts.FAILED] == [prop]
    assert verdicts.exit_code(verdicts.judge(obs)) == 1


def test_fence_unavailable_fails_egress_and_makes_run_properties_not_applicable() -> None:
    obs = healthy()
    obs["runs"] = {}
    obs["fence_unavailable"] = "the container was started without NET_ADMIN"
    got = states(obs)
    assert got["egress-default-deny"][0] == verdicts.FAILED and "--cap-add NET_ADMIN" in got["egress-default-deny"][1]
    assert got["nproc"] == (
        verdicts.NA,
        "no script runs in this deployment (fence unavailable: the container was started without NET_ADMIN)",
    )
    assert got["server-hardening"][0] == got["container-grant"][0] == verdicts.HELD


def test_a_kernel_that_cannot_confine_fails_every_sandbox_property_by_name() -> None:
    obs = healthy()
    obs["runs"] = {}
    obs["sandbox_unavailable"] = "the kernel offers no Landlock (ENOSYS)"
    got = states(obs)
    sandbox = [p for p in got if p.startswith("sandbox-")]
    assert len(sandbox) == 4 and all(
        got[p][0] == verdicts.FAILED and "sandbox-unavailable" in got[p][1] for p in sandbox
    )
    assert got["nproc"][0] == verdicts.NA and "sandbox unavailable" in got["nproc"][1]
    assert got["server-hardening"][0] == verdicts.HELD  # what needs no run still holds


def test_a_probe_that_did_not_run_is_a_failure_never_a_pass() -> None:
    obs = healthy()
    del obs["runs"]["nproc"]
    obs["stopped"] = "the server stopped answering"
    assert states(obs)["nproc"][0] == verdicts.FAILED


def test_without_a_probe_host_the_positive_egress_control_is_not_applicable() -> None:
    obs = healthy()
    obs["facts"]["probe_host"] = None
    state, detail = states(obs)["egress-allowed-host"]
    assert state == verdicts.NA and "--egress-probe-host" in detail


def test_a_property_not_claimed_is_reported_as_such() -> None:
    obs = healthy()
    obs["facts"]["entry"]["no_new_privs"] = False
    obs["facts"]["not_claimed"] = ["container-grant"]
    found = verdicts.judge(obs)
    assert verdicts.exit_code(found) == 0
    assert "not applicable (not claimed" in verdicts.render(found)


def test_the_canary_is_recognised_by_its_hash_not_by_its_prefix() -> None:
    value = b"skmcp-selftest-canary-" + b"a" * 32
    assert observe.holds_canary(b"xx" + value + b"yy", b"skmcp-selftest-canary-", SHA, len(value))
    other = b"skmcp-selftest-canary-" + b"b" * 32
    assert not observe.holds_canary(b"xx" + other + b"yy", b"skmcp-selftest-canary-", SHA, len(value))


def test_a_memory_scan_finds_a_value_held_by_this_process() -> None:
    value = ("skmcp-selftest-canary-" + "c" * 32).encode()
    sha = hashlib.sha256(value).hexdigest()
    held = bytearray(value)  # noqa: F841 - the value must live in this process's heap during the scan
    with observe.own_memory() as mem:
        assert observe.memory_holds_canary(mem, b"skmcp-selftest-canary-", sha, len(value))
        assert not observe.memory_holds_canary(mem, b"skmcp-selftest-canary-", "0" * 64, len(value))


def test_the_documented_selftest_line_carries_every_documented_flag() -> None:
    text = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    block = re.search(
        r"```sh\n(docker run --rm .*? selftest.*?)```", text.split("## Checking a deployment", 1)[1], re.S
    )
    assert block, "docs/deploy.md has no selftest docker line"
    words = block.group(1).replace("\\\n", " ").split()
    flags = run_flags()
    assert all(flag in words for flag in flags), sorted(set(flags) - set(words))


def test_the_installed_probe_skill_is_a_valid_skill_declaring_the_canary_and_the_probe_host(tmp_path: Path) -> None:
    root = launcher_selftest.install_skill("allowed.test", root=str(tmp_path / "selftest"))
    catalog = build_catalog(load_settings([], {"SKILLS_DIR": root}))
    skill = catalog.skills[launcher_selftest.SKILL]
    assert catalog.problems == ()
    assert skill.declaration is not None and skill.declaration.egress == ("allowed.test",)
    assert [(r.script, r.env) for r in skill.declaration.run] == [
        (launcher_selftest.SCRIPT, (launcher_selftest.CANARY_VAR,))
    ]


@pytest.mark.parametrize("host", ["127.0.0.1", "*.example", "example.com.", "bad host"])
def test_selftest_refuses_a_probe_host_that_is_not_a_plain_dns_name(host: str) -> None:
    with pytest.raises(SystemExit):
        launcher_selftest.parse(["--egress-probe-host", host])
    # Positive control: a plain name passes, lowered.
    assert launcher_selftest.parse(["--egress-probe-host", "Allowed.Test"]).egress_probe_host == "allowed.test"


def test_a_cleanup_that_needed_time_holds_and_says_how_long_it_was_waited_for() -> None:
    obs = healthy()
    obs["cleanup_refused"] = 2
    state, detail = states(obs)["cleanup-complete"]
    assert state == verdicts.HELD and "refused 2 times (cleanup-pending)" in detail
