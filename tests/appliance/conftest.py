"""Fixtures for the appliance suite: the image (built once per session), peers, a driver.

Docker must be there. Outside CI a missing Docker skips the suite; with ``CI`` set it fails
it, so CI can never pass by not running it. Traffic goes only to containers this suite
starts on a network it creates. ``TESTCONTAINERS_RYUK_DISABLED`` is forced on: its reaper
image cannot be pulled here, and every container below is stopped by its fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SKILLS = HERE / "skills"
HELPERS = HERE / "helpers"
IMAGE = os.environ.get("SKILL_MCP_IMAGE", "skill-mcp:dev")
# The documented posture (docs/deploy.md); tests that remove a piece say which.
CAPS = ("SETUID", "SETGID", "KILL", "NET_ADMIN", "SETPCAP")
HARDENING = [
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--read-only",
    "--tmpfs",
    "/run:rw,nosuid,nodev,size=64m",
    "--tmpfs",
    "/tmp:rw,nosuid,nodev,size=64m",
]
# With the skills, the probe's code is also mounted where the runtime lives (read by every run's
# sandbox), so that another skill (``quiet``) can run the same code: a run may not read another
# skill's files.
PROBE_LIB = ["-v", f"{SKILLS / 'probe' / 'scripts'}:/usr/local/lib/skill-mcp-test:ro"]
SKILLS_MOUNT = ["-v", f"{SKILLS}:/skills:ro", *PROBE_LIB]
HELPER_CMD = ["/opt/skill-mcp/bin/python", "-I", "/helpers/broker_client.py"]
PY = "/usr/bin/python3.11"


def run_flags(caps: tuple[str, ...] = CAPS) -> list[str]:
    flags = list(HARDENING)
    for cap in caps:
        flags += ["--cap-add", cap]
    return flags


def _docker_problem() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    proc = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, timeout=30, check=False
    )
    if proc.returncode != 0:
        return f"the Docker daemon is not reachable: {proc.stderr.decode(errors='replace').strip()[:200]}"
    return None


@pytest.fixture(scope="session")
def image() -> str:
    problem = _docker_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the appliance suite must run in CI, but {problem}")
        pytest.skip(problem)
    if not os.environ.get("SKILL_MCP_IMAGE_PREBUILT"):
        proc = subprocess.run(
            ["make", "image", f"PY={sys.executable}", f"IMAGE={IMAGE}"],
            cwd=REPO,
            capture_output=True,
            timeout=900,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
        # tests/security registers this fixture a second time (its conftest reuses it): the
        # second instance must not build again.
        os.environ["SKILL_MCP_IMAGE_PREBUILT"] = "1"
    return IMAGE


# The owner's grant every stand-in appliance starts with (the launcher reads it from its own
# environment): the probe may use two of the hosts it declares, quiet none; polyglot runs.
GRANT_ROWS: list[dict[str, Any]] = [
    {
        "skill": "probe",
        "script": "scripts/probe.py",
        "env": ["PROBE_TOKEN"],
        "egress": ["allowed.test", "ext-allowed.example", "loopback.rebind.example"],
    },
    {"skill": "probe", "script": "scripts/long.py"},
    {"skill": "quiet", "script": "scripts/probe.py"},
    {"skill": "polyglot", "script": "scripts/hello.js"},
    {"skill": "polyglot", "script": "scripts/hello.sh"},
]
GRANT = json.dumps(GRANT_ROWS)


def probe_plan(
    mode: str,
    *args: str,
    skill: str = "probe",
    egress: tuple[str, ...] | None = None,
    timeout_s: float | None = None,
    **also: Any,
) -> dict[str, Any]:
    """A run request as the server sends it: what to run; ``also`` adds fields (env, interpreter, ...)."""
    run: dict[str, Any] = {"skill": skill, "script": "scripts/probe.py", "args": [mode, *args], **also}
    if egress is not None:
        run["egress"] = list(egress)
    if timeout_s is not None:
        run["timeout_s"] = timeout_s
    return {"op": "run", "run": run}


class Appliance:
    """One container running the launcher with the broker test client as its 'server'.

    ``request`` writes one JSON line to the client's stdin and reads its one-line reply.
    """

    def __init__(
        self,
        image: str,
        *,
        caps: tuple[str, ...] = CAPS,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
        skills: list[str] | None = None,
    ) -> None:
        self.name = f"skill-mcp-test-{os.getpid()}-{time.monotonic_ns()}"
        settings = {"MCP_SKILL_RUN": GRANT, **(env or {})}
        env_flags = [flag for key, value in settings.items() for flag in ("-e", f"{key}={value}")]
        argv = [
            "docker",
            "run",
            "-i",
            "--rm",
            "--name",
            self.name,
            *run_flags(caps),
            *(extra or []),
            *env_flags,
            *(skills if skills is not None else SKILLS_MOUNT),
            "-v",
            f"{HELPERS}:/helpers:ro",
            image,
            *HELPER_CMD,
        ]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def request(self, message: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        line = _readline(self.proc, timeout)
        assert line, f"no reply; launcher stderr: {self.stderr()}"
        return json.loads(line)

    def run(self, mode: str, *args: str, **kw: Any) -> dict[str, Any]:
        """Run the probe; return the broker's reply with the probe's JSON parsed in as ``out``."""
        reply = self.request(probe_plan(mode, *args, **kw))
        if reply.get("ok"):
            text = reply["result"]["stdout"].strip().splitlines()
            reply["out"] = json.loads(text[-1]) if text else None
        return reply

    def close(self) -> int:
        """End the container (stdin EOF ends the server, then the launcher); keep its stderr."""
        try:
            _, err = self.proc.communicate(timeout=30)  # closes stdin: the server sees EOF
        except subprocess.TimeoutExpired:
            subprocess.run(["docker", "rm", "-f", self.name], capture_output=True, timeout=30, check=False)
            _, err = self.proc.communicate(timeout=30)
        self._stderr = err.decode(errors="replace")
        return self.proc.returncode

    def stderr(self) -> str:
        return getattr(self, "_stderr", "(still running)")[-4000:]


def _readline(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise TimeoutError("the appliance did not answer in time")
    return proc.stdout.readline()


# The web peer answers on 80 and on ALT_WEB_PORT (a port the proxy must never fetch from).
ALT_WEB_PORT = 8080
WEB_PEER = (
    "import http.server, threading\n"
    f"for port in (80, {ALT_WEB_PORT}):\n"
    "    server = http.server.ThreadingHTTPServer(('', port), http.server.SimpleHTTPRequestHandler)\n"
    "    threading.Thread(target=server.serve_forever).start()\n"
)


@pytest.fixture(scope="session")
def peers(image: str) -> Iterator[dict[str, Any]]:
    """A test network with a web peer (aliases allowed.test, other.test) and a logging DNS peer."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

    with Network() as net:
        web = (
            DockerContainer(image)
            .with_network(net)
            .with_network_aliases("allowed.test", "other.test")
            .with_kwargs(entrypoint=["/usr/bin/python3"])
            .with_command(["-c", WEB_PEER])
        )
        with web:
            web_ip = _ip(web, net.name)
            dns = (
                DockerContainer(image)
                .with_network(net)
                .with_volume_mapping(str(HELPERS), "/helpers", "ro")
                .with_kwargs(entrypoint=["/usr/bin/python3"])
                .with_command(["-u", "/helpers/dns_logger.py", web_ip])
            )
            with dns:
                _wait_log(dns, "READY")
                _wait_http(image, net.name)
                yield {"network": net.name, "web_ip": web_ip, "dns_ip": _ip(dns, net.name), "dns": dns}


def _ip(container: Any, network: str) -> str:
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    return str(wrapped.attrs["NetworkSettings"]["Networks"][network]["IPAddress"])


def _wait_log(container: Any, marker: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out, _ = container.get_logs()
        if marker.encode() in out:
            return
        time.sleep(0.1)
    raise TimeoutError(f"{marker!r} never appeared in the peer's log")


def _wait_http(image: str, network: str, timeout: float = 30, url: str = "http://allowed.test/") -> None:
    """The web peer answers ``url`` (checked from a throwaway container on the same network)."""
    probe = (
        "import urllib.request,time\nfor _ in range(300):\n try:\n  urllib.request.urlopen("
        f"'{url}',timeout=1); break\n except Exception: time.sleep(0.1)\nelse: raise SystemExit(1)\n"
    )
    subprocess.run(
        ["docker", "run", "--rm", "--network", network, "--entrypoint", "/usr/bin/python3", image, "-c", probe],
        capture_output=True,
        timeout=timeout + 30,
        check=True,
    )


def dns_queries(peers: dict[str, Any]) -> list[str]:
    out, _ = peers["dns"].get_logs()
    return [line.split()[1] for line in out.decode(errors="replace").splitlines() if line.startswith("QUERY ")]


@pytest.fixture(scope="module")
def appliance(image: str, peers: dict[str, Any]) -> Iterator[Appliance]:
    app = Appliance(image, extra=["--network", peers["network"], "--dns", peers["dns_ip"]])
    try:
        yield app
    finally:
        app.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first test that needs the image also pays for building it (a minute or two on a
    fresh machine, base image included): give image-using tests room beyond the default."""
    for item in items:
        if (
            HERE in Path(str(item.path)).parents
            and "image" in getattr(item, "fixturenames", ())
            and item.get_closest_marker("timeout") is None
        ):
            item.add_marker(pytest.mark.timeout(900))
