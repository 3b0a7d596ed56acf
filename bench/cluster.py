"""N appliance replicas serving ``--http`` behind Debian's HAProxy, on a Docker network of their own.

Used by the scale-out test (``tests/appliance/test_scale_out.py``) and the load figure
(``bench/load.py``). The HAProxy configuration is the one documented in docs/deploy.md
("Scaling out"), read from the document, so the test proves the documented text works; only the
``server`` lines are cut to the number of replicas asked for. Every container is started with
the docker CLI, published on 127.0.0.1 only (the balancer; replicas are not published), and
removed on exit with its network.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEPLOY_MD = REPO / "docs" / "deploy.md"
LB_IMAGE = os.environ.get("SKILL_MCP_LB_IMAGE", "skill-mcp-lb:dev")
PUBLIC_HOST = "mcp.example.com"  # the name the documented config and --allowed-host use
HTTP_PORT = 8000
LB_PORT = 8080
SERVE = (
    "/opt/skill-mcp/bin/python",
    "-I",
    "/opt/skill-mcp/bin/skill-mcp",
    "serve",
    "--http",
    f"0.0.0.0:{HTTP_PORT}",
    "--allowed-host",
    PUBLIC_HOST,
)
# The documented posture (docs/deploy.md, "The run flags"), the same list tests/appliance uses.
POSTURE = (
    "--cap-drop",
    "ALL",
    "--cap-add",
    "SETUID",
    "--cap-add",
    "SETGID",
    "--cap-add",
    "KILL",
    "--cap-add",
    "NET_ADMIN",
    "--cap-add",
    "SETPCAP",
    "--security-opt",
    "no-new-privileges",
    "--read-only",
    "--tmpfs",
    "/run:rw,nosuid,nodev,size=64m",
    "--tmpfs",
    "/tmp:rw,nosuid,nodev,size=64m",
)
_SERVER_LINE = re.compile(r"^\s*server\s+(\S+)\s", re.M)
DOCKER_TIMEOUT_S = 60
BOOT_TIMEOUT_S = 90


def documented_haproxy_cfg() -> str:
    """The ``haproxy.cfg`` block of docs/deploy.md's scale-out section, verbatim."""
    text = DEPLOY_MD.read_text(encoding="utf-8")
    section = text.split("## Scaling out", 1)[1]
    block = re.search(r"```haproxy\n(.*?)```", section, re.S)
    if block is None:
        raise ValueError("docs/deploy.md has no haproxy block in its scale-out section")
    return block.group(1)


def server_names(cfg: str) -> list[str]:
    """The replicas ``cfg`` balances, in order, each once (several backends list the same ones)."""
    return list(dict.fromkeys(_SERVER_LINE.findall(cfg)))


def with_servers(cfg: str, count: int) -> str:
    """``cfg`` keeping its first ``count`` ``server`` lines (the replicas this run starts)."""
    names = server_names(cfg)
    if count > len(names):
        raise ValueError(f"the configuration names {len(names)} servers, {count} asked for")
    drop = set(names[count:])
    return "".join(
        line for line in cfg.splitlines(keepends=True) if not ((m := _SERVER_LINE.match(line)) and m.group(1) in drop)
    )


def without_stickiness(cfg: str) -> str:
    """``cfg`` with its ``stick`` rules and table removed: the negative control."""
    return "".join(line for line in cfg.splitlines(keepends=True) if not line.strip().startswith("stick"))


def without_run_routing(cfg: str) -> str:
    """``cfg`` with its ``use_backend`` rules removed (every request round-robin): a control."""
    return "".join(line for line in cfg.splitlines(keepends=True) if not line.strip().startswith("use_backend"))


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    image: str
    skills: tuple[Path, ...]  # one skills directory per replica (the same one for identical replicas)
    token: str
    haproxy_cfg: str
    lb_image: str = LB_IMAGE
    posture: tuple[str, ...] = POSTURE
    env: tuple[tuple[str, str], ...] = ()  # more environment for every replica (an owner's grant)


@dataclass(frozen=True, slots=True)
class Cluster:
    network: str
    replicas: tuple[str, ...]  # container names, also their network aliases (the config's server names)
    balancer: str
    port: int  # the balancer's port on 127.0.0.1
    tmp: Path  # holds the balancers' configuration files while the cluster runs
    lb_image: str

    @property
    def url(self) -> str:
        return url(self.port)

    def logs(self, container: str) -> str:
        proc = _docker("logs", container, check=False)
        return proc.stdout + proc.stderr


def url(port: int) -> str:
    return f"http://127.0.0.1:{port}/mcp"


def _docker(*args: str, check: bool = True, timeout: float = DOCKER_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def _wait_for(container: str, marker: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        proc = _docker("logs", container, check=False)
        if marker in proc.stdout or marker in proc.stderr:
            return
        state = _docker("inspect", "-f", "{{.State.Running}}", container, check=False).stdout.strip()
        if state != "true":
            break
        time.sleep(0.2)
    tail = (_docker("logs", container, check=False).stderr or "")[-3000:]
    raise RuntimeError(f"{container} never logged {marker!r}; its log ends: {tail}")


def _start_balancer(network: str, cfg_text: str, lb_image: str, tmp: Path, deadline: float) -> tuple[str, int]:
    cfg = tmp / f"haproxy-{time.monotonic_ns()}.cfg"
    cfg.write_text(cfg_text, encoding="utf-8")
    cfg.chmod(0o644)  # HAProxy reads it as its own unprivileged user
    name = f"skill-mcp-lb-{os.getpid()}-{time.monotonic_ns()}"
    _docker(
        "run",
        "-d",
        "--name",
        name,
        "--network",
        network,
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "-p",
        f"127.0.0.1::{LB_PORT}",
        "-v",
        f"{cfg}:/usr/local/etc/haproxy/haproxy.cfg:ro",
        lb_image,
    )
    try:
        _wait_for(name, "Loading success", deadline)
        mapped = _docker("port", name, str(LB_PORT)).stdout.splitlines()[0]
    except BaseException:
        _docker("rm", "-f", name, check=False)
        raise
    return name, int(mapped.rsplit(":", 1)[1])


@contextmanager
def running(spec: ClusterSpec) -> Iterator[Cluster]:
    """Start the replicas, then the balancer in front of them; remove everything on exit."""
    stamp = f"{os.getpid()}-{time.monotonic_ns()}"
    network = f"skill-mcp-scale-{stamp}"
    names = server_names(spec.haproxy_cfg)[: len(spec.skills)]
    started: list[str] = []
    _docker("network", "create", network)
    try:
        with tempfile.TemporaryDirectory(prefix="skill-mcp-lb-") as tmp:
            Path(tmp).chmod(0o755)
            for name, skills in zip(names, spec.skills, strict=True):
                container = f"{name}-{stamp}"
                started.append(container)
                _docker(
                    "run",
                    "-d",
                    "--name",
                    container,
                    "--network",
                    network,
                    "--network-alias",
                    name,
                    *spec.posture,
                    "-v",
                    f"{skills}:/skills:ro",
                    "-e",
                    f"MCP_HTTP_TOKEN={spec.token}",
                    *(arg for key, value in spec.env for arg in ("-e", f"{key}={value}")),
                    spec.image,
                    *SERVE,
                )
            deadline = time.monotonic() + BOOT_TIMEOUT_S
            for container in started:
                _wait_for(container, "http-listening", deadline)
            lb, port = _start_balancer(network, spec.haproxy_cfg, spec.lb_image, Path(tmp), deadline)
            started.append(lb)
            yield Cluster(network, tuple(started[:-1]), lb, port, Path(tmp), spec.lb_image)
    finally:
        for container in started:
            _docker("rm", "-f", container, check=False)
        _docker("network", "rm", network, check=False)


@contextmanager
def another_balancer(cluster: Cluster, cfg_text: str) -> Iterator[int]:
    """A second balancer in front of the same replicas with ``cfg_text``; yields its local port."""
    name, port = _start_balancer(
        cluster.network, cfg_text, cluster.lb_image, cluster.tmp, time.monotonic() + BOOT_TIMEOUT_S
    )
    try:
        yield port
    finally:
        _docker("rm", "-f", name, check=False)
