"""The deployment examples in docs/deploy.md boot as written.

The fly.toml example is parsed out of the document and its process command run the way Fly
runs it: a process group's command replaces the image's CMD and keeps its ENTRYPOINT (the
launcher). It must boot, answer MCP for the app's public name with the bearer token, and
refuse any other Host name (DNS-rebinding protection over a wildcard bind).

The Kubernetes examples are parsed too: the Deployment's Pods must hold the Pod example's posture
field for field, the Services and the autoscaler must point at them, and the Deployment's
container is booted in the image with the docker flags its securityContext and volumes mean.
"""

from __future__ import annotations

import http.client
import json
import re
import shlex
import subprocess
import time
import tomllib
from typing import Any

import pytest

from tests.appliance.conftest import CAPS, REPO, SKILLS_MOUNT, run_flags

pytestmark = pytest.mark.appliance

TOKEN = "fly-example-token-0123456789abcdef"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "deploy-docs-test", "version": "0"},
    },
}


def fly_toml() -> dict[str, Any]:
    text = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = text.split("## fly.io", 1)[1]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block, "docs/deploy.md has no fly.toml block"
    return tomllib.loads(block.group(1))


def _post(port: int, host: str, token: str | None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("POST", "/mcp", body=json.dumps(INIT), headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read(65536).decode(errors="replace")
    finally:
        conn.close()


def _wait_answer(port: int, host: str, cid: str) -> tuple[int, str]:
    last: BaseException | None = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # bounded: the server listens a moment after the launcher boots
        try:
            return _post(port, host, TOKEN)
        except OSError as exc:
            last = exc
            running = subprocess.run(
                ["docker", "inspect", "-f", "{{.State.Running}}", cid],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout.strip()
            if running != "true":
                break  # it exited: no use waiting for it to listen
            time.sleep(0.25)
    logs = subprocess.run(["docker", "logs", cid], capture_output=True, text=True, timeout=30, check=False)
    raise AssertionError(f"the example never answered: {last!r}; logs: {logs.stderr[-3000:]}")


def _get_metrics(port: int, host: str, token: str | None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host, **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        conn.request("GET", "/metrics", headers=headers)
        resp = conn.getresponse()
        body = resp.read(1 << 20).decode(errors="replace")
        return resp.status if resp.status != 200 or "# TYPE" in body else -1
    finally:
        conn.close()


def _assert_serves_only(
    public: str, image: str, flags: list[str], argv: list[str], port: int, scrape_host: str | None = None
) -> None:
    """Start the image detached as an example does (``port`` published on loopback): requests
    for its public name with the token are answered, another Host name or no token refused.
    With ``scrape_host``, the example's ``/metrics`` answers a scraper under that Host with the
    token (and refuses one without it)."""
    cid = subprocess.run(
        ["docker", "run", "-d", *flags, "-p", f"127.0.0.1::{port}", image, *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    try:
        mapped = subprocess.run(
            ["docker", "port", cid, str(port)], capture_output=True, text=True, timeout=30, check=False
        ).stdout
        assert mapped, subprocess.run(
            ["docker", "logs", cid], capture_output=True, text=True, timeout=30, check=False
        ).stderr[-3000:]
        local = int(mapped.split("\n")[0].rsplit(":", 1)[1])
        # Positive control: the public name with the token gets the initialize result.
        status, body = _wait_answer(local, public, cid)
        assert status == 200 and '"serverInfo"' in body, (status, body)
        # The denials: another Host name, and the right name without the token.
        assert _post(local, "rebound.attacker.example", TOKEN)[0] == 421
        assert _post(local, public, None)[0] == 401
        if scrape_host is not None:
            assert _get_metrics(local, scrape_host, TOKEN) == 200
            assert _get_metrics(local, scrape_host, None) == 401
            assert _get_metrics(local, "rebound.attacker.example", TOKEN) == 421
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=60, check=False)


def test_fly_toml_example_boots_and_refuses_other_host_names(image: str) -> None:
    conf = fly_toml()
    command = shlex.split(conf["processes"]["app"])
    (service,) = conf["services"]
    public = f"{conf['app']}.fly.dev"
    assert conf["mounts"]["destination"] == conf["env"]["MCP_SKILLS_PATH"] == "/skills"  # where SKILLS_MOUNT puts them
    env = [f"--env={k}={v}" for k, v in conf["env"].items()]
    flags = [*run_flags(), *SKILLS_MOUNT, *env, "-e", f"MCP_HTTP_TOKEN={TOKEN}"]
    _assert_serves_only(public, image, flags, command, service["internal_port"])


def kubernetes_objects() -> dict[str, dict[str, Any]]:
    """Every object of the two Kubernetes sections, keyed ``Kind/name``."""
    import yaml

    text = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    objects: dict[str, dict[str, Any]] = {}
    for heading in ("## Kubernetes (Pod)", "## Kubernetes (Deployment"):
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        for block in re.findall(r"```yaml\n(.*?)```", section, re.S):
            for obj in yaml.safe_load_all(block):
                objects[f"{obj['kind']}/{obj['metadata']['name']}"] = obj
    return objects


def _only_container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec["containers"]
    return dict(container)


def test_kubernetes_deployment_keeps_the_pod_examples_posture() -> None:
    objs = kubernetes_objects()
    pod_spec = objs["Pod/skill-mcp"]["spec"]
    deployment = objs["Deployment/skill-mcp"]
    template = deployment["spec"]["template"]
    spec = template["spec"]
    pod, replica = _only_container(pod_spec), _only_container(spec)
    # The posture itself (the Pod example's, as docs/deploy.md explains it) ...
    ctx = pod["securityContext"]
    assert ctx["runAsUser"] == 0 and ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True and ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    assert ctx["capabilities"]["drop"] == ["ALL"] and set(ctx["capabilities"]["add"]) == set(CAPS)
    # ... and the Deployment's Pods hold it field for field.
    assert replica["securityContext"] == ctx
    assert spec["automountServiceAccountToken"] is pod_spec["automountServiceAccountToken"] is False
    assert replica["volumeMounts"] == pod["volumeMounts"] and spec["volumes"] == pod_spec["volumes"]
    skills = next(v for v in spec["volumes"] if v["name"] == "skills")
    assert skills["persistentVolumeClaim"]["readOnly"] is True
    assert {"name": "skills", "mountPath": "/skills", "readOnly": True} in replica["volumeMounts"]
    # Secrets come from a Secret, never written into the manifest.
    assert all("valueFrom" in e and "value" not in e for e in replica["env"])
    assert {e["name"] for e in replica["env"]} >= {"MCP_HTTP_TOKEN"}
    # The command serves HTTP on the container's port for a public name; no stdin.
    args = replica["args"]
    (port,) = replica["ports"]
    assert args[args.index("--http") + 1] == f"0.0.0.0:{port['containerPort']}" and "--allowed-host" in args
    assert "stdin" not in replica
    # The Service, the headless Service and the autoscaler all point at these Pods.
    labels = template["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels
    services = [o for o in objs.values() if o["kind"] == "Service"]
    assert len(services) == 2 and any(s["spec"].get("clusterIP") == "None" for s in services)
    for service in services:
        assert service["spec"]["selector"] == labels
        assert [p["targetPort"] for p in service["spec"]["ports"]] == [port["name"]]
    hpa = objs["HorizontalPodAutoscaler/skill-mcp"]["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "skill-mcp"}
    assert hpa["minReplicas"] >= 2 and replica["resources"]["requests"]["cpu"]  # a CPU target needs a request


def _docker_flags(container: dict[str, Any], volumes: list[dict[str, Any]]) -> list[str]:
    """What the container's securityContext and volumes mean for ``docker run``."""
    ctx = container["securityContext"]
    flags = ["--user", str(ctx["runAsUser"]), "--cap-drop", "ALL"]
    for cap in ctx["capabilities"]["add"]:
        flags += ["--cap-add", cap]
    if ctx["allowPrivilegeEscalation"] is False:
        flags += ["--security-opt", "no-new-privileges"]
    if ctx["readOnlyRootFilesystem"]:
        flags.append("--read-only")
    by_name = {v["name"]: v for v in volumes}
    for mount in container["volumeMounts"]:
        volume = by_name[mount["name"]]
        if "emptyDir" in volume:
            size = volume["emptyDir"]["sizeLimit"].removesuffix("Mi")
            flags += ["--tmpfs", f"{mount['mountPath']}:rw,nosuid,nodev,size={size}m"]
        else:
            assert mount["mountPath"] == "/skills" and mount["readOnly"], mount
            flags += SKILLS_MOUNT
    return flags


def test_kubernetes_deployment_container_boots_and_refuses_other_host_names(image: str) -> None:
    spec = kubernetes_objects()["Deployment/skill-mcp"]["spec"]["template"]["spec"]
    container = _only_container(spec)
    (port,) = container["ports"]
    # What Kubernetes fills in: the Secret's values, and the Pod's address (a documentation
    # address: no traffic goes to it, it is only the Host a scraper would send).
    values = {"MCP_HTTP_TOKEN": TOKEN, "MCP_SKILL_RUN": "[]", "POD_IP": "192.0.2.7"}
    env = [f"--env={e['name']}={values[e['name']]}" for e in container["env"]]
    # Kubernetes expands $(NAME) in args from the container's env.
    args = [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in container["args"]]
    public = args[args.index("--allowed-host") + 1]
    _assert_serves_only(
        public,
        image,
        _docker_flags(container, spec["volumes"]) + env,
        args,
        port["containerPort"],
        scrape_host=values["POD_IP"] if "--metrics" in args else None,
    )
