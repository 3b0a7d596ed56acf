"""The real server inside the appliance, driven by the SDK client over ``docker run -i``.

The appliance suite (tests/appliance) drives the launcher with a stand-in server to observe the
broker; this half of the security suite drives the product itself - the image's own
entrypoint and command - so the denials are proven end to end. It reuses that suite's image, run
flags and peers (tests/appliance/conftest.py) and adds one peer of its own: a DNS server that
answers every ``*.example`` name with 127.0.0.1, for the rebinding case.

Process facts are read from the host's ``/proc`` (the test runs as root on the Docker host),
restricted to the container's pid namespace, so neither the server's non-dumpable flag nor
the container's dropped capabilities get in the way of measuring, and no other container's
processes (other suites use the same uids) are counted.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mcp import StdioServerParameters

from tests.appliance.conftest import SKILLS, run_flags
from tests.security.harness import Session, open_session

# The one probe skill both suites share (tests/appliance/skills/probe), mounted alone.
PROBE_SKILL = "probe"
PROBE_MOUNT = ["-v", f"{SKILLS / PROBE_SKILL}:/skills/{PROBE_SKILL}:ro"]
SERVER_UID, SCRIPT_UID, PROXY_UID = 10001, 10002, 10003
SECRET = "appliance-canary-4f1c2a9e"
GRANT = json.dumps(
    [
        {
            "skill": PROBE_SKILL,
            "script": "scripts/probe.py",
            "egress": ["allowed.test", "rebind.example", "ext-allowed.example"],
        },
        {"skill": PROBE_SKILL, "script": "scripts/short.py"},  # granted to run, but no host accepted for it
    ]
)


@dataclass
class AppServer:
    session: Session
    name: str

    @property
    def init_pid(self) -> int:
        out = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Pid}}", self.name], capture_output=True, timeout=30, check=True
        )
        return int(out.stdout.strip())

    def procs(self) -> list[dict[str, Any]]:
        """Every process in the container's pid namespace, read from the host."""
        ns = os.readlink(f"/proc/{self.init_pid}/ns/pid")
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                    continue
                out.append(host_status(int(entry)))
            except OSError:
                continue
        return out

    def of_uid(self, uid: int) -> list[dict[str, Any]]:
        return [p for p in self.procs() if p["uid"] == uid]

    def server_pid(self) -> int:
        (server,) = [p["pid"] for p in self.of_uid(SERVER_UID)]
        return int(server)

    def exec(self, *argv: str, privileged: bool = False) -> subprocess.CompletedProcess[bytes]:
        flags = ["--privileged"] if privileged else []
        return subprocess.run(
            ["docker", "exec", *flags, self.name, *argv], capture_output=True, timeout=60, check=False
        )


def host_status(pid: int) -> dict[str, Any]:
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
        fields = dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
    return {
        "pid": pid,
        "uid": int(fields["Uid"].split()[0]),
        "state": fields["State"][:1],
        "name": fields["Name"],
        "CapEff": fields["CapEff"],
        "CapPrm": fields["CapPrm"],
        "CapBnd": fields["CapBnd"],
        "NoNewPrivs": fields.get("NoNewPrivs"),
        "NSpid": int(fields.get("NSpid", "0").split()[-1]),
        "VmRSS_kB": int(fields.get("VmRSS", "0 kB").split()[0]),
    }


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def appliance_params(
    image: str, name: str, *, network: str, dns: str, env: Mapping[str, str] | None = None
) -> StdioServerParameters:
    settings = {
        "MCP_SKILL_RUN": GRANT,
        "MCP_CONFIRM_ELICITATION": "off",
        "SEC_SERVER_SECRET": SECRET,
        "SKILL_MCP_LOG": "warning",
        **(env or {}),
    }
    args = ["run", "-i", "--rm", "--name", name, *run_flags(), "--network", network, "--dns", dns, *PROBE_MOUNT]
    for key, value in settings.items():
        args += ["-e", f"{key}={value}"]
    return StdioServerParameters(command="docker", args=[*args, image], env={"PATH": os.environ["PATH"]})


@contextmanager
def open_appliance(image: str, name: str, **kw: Any) -> Iterator[AppServer]:
    try:
        with open_session(appliance_params(image, name, **kw), read_timeout=180, skill=PROBE_SKILL) as session:
            yield AppServer(session=session, name=name)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60, check=False)
