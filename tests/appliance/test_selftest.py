"""``selftest``: the report is right for the documented posture and for each weakened one.

Every test starts the real image with ``selftest`` as its command: the launcher boots as in
production and the probes are real runs through the broker. The documented flags must give
an all-held report and exit 0; each weakening must turn its own property to FAILED, with a
message naming the flag, and make the exit status non-zero. The passing run is the positive
control for every weakened one (same image, same probes, one flag changed).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.appliance.conftest import CAPS, SKILLS_MOUNT, run_flags
from tests.appliance.served import run_confirmed, served

pytestmark = pytest.mark.appliance

GO = "/tmp/selftest-go"  # inside the container's own /tmp tmpfs


def _report(proc: subprocess.Popen[bytes]) -> tuple[int, dict[str, Any], str]:
    out, err_b = proc.communicate(timeout=240)
    err = err_b.decode(errors="replace")
    assert out, f"no report; stderr: {err[-3000:]}"
    report = json.loads(out)
    assert report["exitCode"] == proc.returncode
    return proc.returncode, {p["id"]: p for p in report["properties"]}, err


def _start(image: str, flags: list[str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["docker", "run", "--rm", *flags, image, "selftest", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def selftest(image: str, flags: list[str], *args: str) -> tuple[int, dict[str, Any], str]:
    """Run ``selftest --json``; the exit status, the report keyed by property, and stderr."""
    return _report(_start(image, flags, *args))


def _without(*drop: str) -> tuple[str, ...]:
    return tuple(c for c in CAPS if c not in drop)


# One deployment per weakened posture; the module fixture runs each once and every test
# reads its own report.
WEAKENED: dict[str, list[str]] = {
    "no-probe-host": [*run_flags(), *SKILLS_MOUNT, "--network", "none"],
    "no-nnp": [f for f in run_flags() if f not in ("--security-opt", "no-new-privileges")] + SKILLS_MOUNT,
    "no-net-admin": [*run_flags(_without("NET_ADMIN")), *SKILLS_MOUNT],
    "no-setpcap": [*run_flags(_without("SETPCAP")), *SKILLS_MOUNT],
    "sys-ptrace": [*run_flags((*CAPS, "SYS_PTRACE")), *SKILLS_MOUNT],
}


@pytest.fixture(scope="module")
def writable_skills(tmp_path_factory: pytest.TempPathFactory) -> Path:
    skills = tmp_path_factory.mktemp("selftest") / "skills"
    (skills / "weather").mkdir(parents=True)
    (skills / "weather" / "SKILL.md").write_text("---\nname: weather\ndescription: d\n---\n", encoding="utf-8")
    for path in (skills, skills / "weather"):
        path.chmod(0o777)  # a mount the script uid can write: what a careless volume looks like
    return skills


@pytest.fixture(scope="module")
def reports(image: str, writable_skills: Path) -> dict[str, tuple[int, dict[str, Any], str]]:
    flags = {**WEAKENED, "writable-skills": [*run_flags(), "-v", f"{writable_skills}:/skills:rw"]}
    # One after another, never at once: RLIMIT_NPROC counts the script uid across the whole
    # kernel, so one deployment's fork probe would starve another's runs.
    return {name: selftest(image, argv) for name, argv in flags.items()}


def failed(props: dict[str, Any]) -> set[str]:
    return {pid for pid, p in props.items() if p["state"] == "FAILED"}


def test_selftest_holds_everything_with_the_documented_flags(image: str, peers: dict[str, Any]) -> None:
    net = ["--network", peers["network"], "--dns", peers["dns_ip"]]
    code, props, err = selftest(image, [*run_flags(), *net, *SKILLS_MOUNT], "--egress-probe-host", "allowed.test")
    assert failed(props) == set(), {p: props[p]["detail"] for p in failed(props)}
    assert code == 0
    assert {p["state"] for p in props.values()} == {"held"}  # the peer makes the egress control applicable
    assert "answered 200" in props["egress-allowed-host"]["detail"]
    assert "EAGAIN" in props["nproc"]["detail"]
    assert '"event": "boot"' in err and '"fence": true' in err  # the production boot ran


def test_selftest_without_a_probe_host_says_not_applicable_and_never_fakes_it(reports: dict[str, Any]) -> None:
    _, props, _ = reports["no-probe-host"]
    assert props["egress-allowed-host"]["state"] == "not applicable"
    assert "--egress-probe-host" in props["egress-allowed-host"]["detail"]
    # Positive control: the rest of the battery ran in the same deployment.
    assert props["egress-default-deny"]["state"] == "held"
    assert props["nproc"]["state"] == "held"


def test_selftest_fails_without_no_new_privileges(reports: dict[str, Any]) -> None:
    code, props, _ = reports["no-nnp"]
    assert code == 1
    assert props["container-grant"]["state"] == "FAILED"
    assert "--security-opt no-new-privileges" in props["container-grant"]["detail"]
    # The launcher still sets it for everything it starts: that property is not the one failing.
    assert props["no-new-privileges"]["state"] == "held"


def test_selftest_fails_without_net_admin_and_says_the_fence_is_unavailable(reports: dict[str, Any]) -> None:
    code, props, _ = reports["no-net-admin"]
    assert code == 1
    assert props["egress-default-deny"]["state"] == "FAILED"
    assert "fence unavailable" in props["egress-default-deny"]["detail"]
    assert "NET_ADMIN" in props["egress-default-deny"]["detail"]
    # No script can run, so the script-side properties are not applicable, and say why.
    assert props["nproc"]["state"] == "not applicable" and "fence unavailable" in props["nproc"]["detail"]
    assert props["server-hardening"]["state"] == "held"


def test_selftest_fails_without_setpcap_and_names_the_bounding_set(reports: dict[str, Any]) -> None:
    code, props, _ = reports["no-setpcap"]
    assert code == 1
    assert props["capabilities"]["state"] == "FAILED"
    assert "CapBnd not empty" in props["capabilities"]["detail"]
    assert "SETPCAP" in props["capabilities"]["detail"]
    assert props["container-grant"]["state"] == "held"


def test_selftest_fails_with_sys_ptrace_added(reports: dict[str, Any]) -> None:
    code, props, _ = reports["sys-ptrace"]
    assert code == 1
    assert props["container-grant"]["state"] == "FAILED"
    assert "SYS_PTRACE" in props["container-grant"]["detail"]
    # The launcher still empties the bounding set: scripts never see it.
    assert props["capabilities"]["state"] == "held"


def test_selftest_fails_with_a_writable_skills_mount(reports: dict[str, Any], writable_skills: Path) -> None:
    code, props, _ = reports["writable-skills"]
    assert code == 1
    assert props["skills-read-only"]["state"] == "FAILED"
    assert ":ro" in props["skills-read-only"]["detail"] and "/skills" in props["skills-read-only"]["detail"]
    assert list(writable_skills.rglob(".selftest-*")) == []  # the probes remove what they proved they could write


def test_selftest_fails_when_the_ruleset_is_flushed_after_boot(image: str) -> None:
    """``docker exec`` holds the container's NET_ADMIN: flush the ruleset while selftest waits."""
    name = f"skill-mcp-selftest-{os.getpid()}-{time.monotonic_ns()}"
    argv = ["docker", "run", "--rm", "--name", name, *run_flags(), *SKILLS_MOUNT, image, "selftest", "--wait-for", GO]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_line(proc, f"selftest: waiting for {GO}")
        flush = subprocess.run(
            ["docker", "exec", name, "/usr/sbin/nft", "flush", "ruleset"], capture_output=True, timeout=60, check=False
        )
        assert flush.returncode == 0, flush.stderr
        subprocess.run(["docker", "exec", name, "touch", GO], capture_output=True, timeout=60, check=True)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60, check=False)
            proc.communicate(timeout=60)
    text = out.decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("egress-default-deny "))
    # The run's sandbox still refuses the direct TCP connection; what the flushed ruleset lets
    # through is UDP, so the resolver answers the script's DNS query.
    assert "FAILED" in line and "DNS query" in line and "NET_ADMIN" in line, text
    assert proc.returncode == 1
    assert "FAILED" in text.splitlines()[-1]  # the summary line counts it


def _wait_for_line(proc: subprocess.Popen[bytes], marker: str, timeout: float = 120) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    seen = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while marker.encode() not in seen:
            left = deadline - time.monotonic()
            assert left > 0 and sel.select(left), f"{marker!r} never appeared: {seen[-2000:]!r}"
            chunk = os.read(proc.stderr.fileno(), 65536)
            assert chunk, f"the container ended first: {seen[-2000:]!r}"
            seen += chunk


def test_a_serving_container_never_offers_the_probe_skill(image: str) -> None:
    """The probe skill ships in the image but sits under no skills root of a serving server."""
    grant = {
        "MCP_SKILL_RUN": json.dumps(
            [{"skill": "skill-mcp-selftest", "script": "scripts/probe.py", "env": ["SKILL_MCP_SELFTEST_SECRET"]}]
        )
    }

    async def go() -> None:
        async with served(image, grant) as client:
            listing = (await client.call_tool("skill_list", {})).structured_content or {}
            names = {skill["name"] for skill in listing["skills"]}
            assert "skill-mcp-selftest" not in names
            assert "probe" in names  # positive control: the mounted skills are listed
            # The owner's grant naming it matches nothing, and says so.
            assert "grant-unmatched" in json.dumps(listing.get("problems", []))
            refused = await run_confirmed(client, ["posture"], skill="skill-mcp-selftest")
            assert refused.get("reason") == "unknown-skill", refused

    anyio.run(go)
