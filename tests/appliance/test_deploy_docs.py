"""The deployment examples in docs/deploy.md boot as written.

The fly.toml example is parsed out of the document and its process command run the way Fly
runs it: a process group's command replaces the image's CMD and keeps its ENTRYPOINT (the
launcher). It must boot, answer MCP for the app's public name with the bearer token, and
refuse any other Host name (DNS-rebinding protection over a wildcard bind).
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

from tests.appliance.conftest import REPO, SKILLS_MOUNT, run_flags

pytestmark = pytest.mark.appliance

TOKEN = "fly-example-token-0123456789abcdef"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "deploy-docs-test", "version": "0"}}}


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
            running = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", cid], capture_output=True,
                                     text=True, timeout=30, check=False).stdout.strip()
            if running != "true":
                break  # it exited: no use waiting for it to listen
            time.sleep(0.25)
    logs = subprocess.run(["docker", "logs", cid], capture_output=True, text=True, timeout=30, check=False)
    raise AssertionError(f"the fly.toml example never answered: {last!r}; logs: {logs.stderr[-3000:]}")


def test_fly_toml_example_boots_and_refuses_other_host_names(image: str) -> None:
    conf = fly_toml()
    command = shlex.split(conf["processes"]["app"])
    (service,) = conf["services"]
    public = f"{conf['app']}.fly.dev"
    assert conf["mounts"]["destination"] == conf["env"]["MCP_SKILLS_PATH"] == "/skills"  # where SKILLS_MOUNT puts them
    env = [f"--env={k}={v}" for k, v in conf["env"].items()]
    flags = [*run_flags(), *SKILLS_MOUNT, *env, "-e", f"MCP_HTTP_TOKEN={TOKEN}",
             "-p", f"127.0.0.1::{service['internal_port']}"]
    cid = subprocess.run(["docker", "run", "-d", *flags, image, *command], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    try:
        mapped = subprocess.run(["docker", "port", cid, str(service["internal_port"])], capture_output=True,
                                text=True, timeout=30, check=False).stdout
        assert mapped, subprocess.run(["docker", "logs", cid], capture_output=True, text=True, timeout=30,
                                      check=False).stderr[-3000:]
        port = int(mapped.split("\n")[0].rsplit(":", 1)[1])
        # Positive control: the app's public name with the token gets the initialize result.
        status, body = _wait_answer(port, public, cid)
        assert status == 200 and '"serverInfo"' in body, (status, body)
        # The denials: another Host name, and the right name without the token.
        assert _post(port, "rebound.attacker.example", TOKEN)[0] == 421
        assert _post(port, public, None)[0] == 401
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=60, check=False)
