"""The real server inside the appliance, driven over stdio by the SDK client.

The stdio command is ``docker run -i ...`` with the documented flags; the launcher is PID 1
and the server is the image's default command.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.appliance.conftest import CAPS, SKILLS_MOUNT, run_flags
from tests.appliance.served import PROBE, grant, run_confirmed, served
from tests.helpers import blob_of, text_of, write_skill

pytestmark = pytest.mark.appliance


def test_hosted_default_runs_nothing_and_still_serves_instructions(image: str) -> None:
    async def go() -> None:
        async with served(image) as client:
            load = await client.call_tool("skill_load", {"name": "probe"})
            # SKILL.md (the instructions) travels once, as the content's resource block.
            assert not load.is_error and "Test-only skill" in text_of(load.content[0])
            refused = await run_confirmed(client, ["id"])
            assert refused["reason"] == "not-granted"
        # Positive control: the same call with the owner's grant runs, as the script uid.
        async with served(image, grant(PROBE)) as client:
            ran = await run_confirmed(client, ["id"])
            assert ran["status"] == "ok", ran
            assert json.loads(ran["stdout"])["uid"] == 10002

    anyio.run(go)


def test_server_process_holds_no_capabilities_and_its_environ_is_unreadable(image: str) -> None:
    async def go() -> None:
        async with served(image, grant(PROBE)) as client:
            ran = await run_confirmed(client, ["server"])
            found = json.loads(ran["stdout"])["server"]
            assert len(found) == 1  # positive control: the script sees the server process
            server = found[0]
            assert server["CapEff"] == server["CapPrm"] == "0000000000000000"
            assert server["NoNewPrivs"] == "1"
            assert server["environ"] in {"EACCES", "EPERM"}
            assert server["environ_owner"] == 0  # non-dumpable: its /proc files belong to root

    anyio.run(go)


def test_without_net_admin_the_server_serves_instructions_and_refuses_scripts(image: str) -> None:
    async def go() -> None:
        async with served(image, grant(PROBE), caps=("SETUID", "SETGID", "KILL")) as client:
            load = await client.call_tool("skill_load", {"name": "probe"})
            assert not load.is_error
            refused = await run_confirmed(client, ["id"])
            assert refused["reason"] == "fence-unavailable"

    anyio.run(go)


def test_skill_that_did_not_declare_the_host_gets_403(image: str, peers: dict[str, Any]) -> None:
    net = ("--network", peers["network"])
    grants = grant(
        {**PROBE, "egress": ["allowed.test"]},
        {"skill": "quiet", "script": "scripts/probe.py", "egress": ["allowed.test"]},
    )

    async def go() -> None:
        async with served(image, grants, extra=net) as client:
            quiet = await run_confirmed(client, ["net", "proxy", "http://allowed.test/"], skill="quiet")
            assert json.loads(quiet["stdout"]) == {"status": 403}
            # Positive control: the skill that declared it, with the owner's acceptance, gets through.
            probe = await run_confirmed(client, ["net", "proxy", "http://allowed.test/"])
            assert json.loads(probe["stdout"]) == {"status": 200}

    anyio.run(go)


def test_time_from_docker_run_to_initialize_is_bounded(image: str) -> None:
    async def go() -> float:
        started = time.monotonic()
        async with served(image) as client:
            elapsed = time.monotonic() - started
            assert client.server_capabilities is not None
        return elapsed

    elapsed = anyio.run(go)
    assert elapsed < 30, elapsed  # generous bound for a loaded CI box; the figure is in docs/deploy.md


def test_http_transport_answers_from_the_appliance(image: str) -> None:
    """The ruleset lets the server answer on its HTTP port (and nothing else: see test_egress)."""
    import subprocess

    from tests.http.harness import http_client

    token = "appliance-token-0123456789abcdef"
    flags = [*run_flags(CAPS), *SKILLS_MOUNT, "-p", "127.0.0.1::8000", "-e", f"MCP_HTTP_TOKEN={token}"]
    cmd = [
        "/opt/skill-mcp/bin/python",
        "-I",
        "/opt/skill-mcp/bin/skill-mcp",
        "serve",
        "--http",
        "0.0.0.0:8000",
        "--allowed-host",
        "127.0.0.1",
    ]
    cid = subprocess.run(
        ["docker", "run", "-d", "--rm", *flags, image, *cmd], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    try:
        port = (
            subprocess.run(["docker", "port", cid, "8000"], capture_output=True, text=True, check=True, timeout=30)
            .stdout.split("\n")[0]
            .rsplit(":", 1)[1]
        )

        async def go() -> list[str]:
            last: BaseException | None = None
            for _ in range(60):  # bounded: the server needs a moment to listen after the launcher boots
                try:
                    async with http_client(f"http://127.0.0.1:{port}/mcp", token=token) as client:
                        return [t.name for t in (await client.list_tools()).tools]
                except Exception as exc:  # connection refused/reset until it listens
                    last = exc
                    await anyio.sleep(0.25)
            raise AssertionError(f"the HTTP server never answered: {last!r}")

        assert "skill_run" in anyio.run(go)
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=60, check=False)


@pytest.mark.timeout(600)
def test_many_large_reads_at_once_cannot_get_the_server_oom_killed(image: str) -> None:
    """Under the documented 512 MiB (no swap), 64 ``resources/read`` of a 6 MB file sent at once
    would hold about 1.4 GB if every answer were made together; the server makes them in turn
    (``surfaces.answer_bytes``), so it is not the OOM killer's and every answer arrives whole."""
    root = Path(tempfile.mkdtemp(prefix="skill-mcp-answers-"))
    try:
        blob = os.urandom(6_000_000)
        skill = write_skill(root, "blob", description="One large binary file.")
        (skill / "ref").mkdir()
        (skill / "ref" / "blob.bin").write_bytes(blob)
        for path in (root, skill, skill / "ref", skill / "SKILL.md", skill / "ref" / "blob.bin"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # the server uid reads them
        want = hashlib.sha256(blob).hexdigest()
        got: list[str] = []

        async def go() -> None:
            mount = ("-v", f"{root}:/skills:ro")
            async with served(image, extra=("--memory", "512m", "--memory-swap", "512m"), mounts=mount) as client:

                async def read() -> None:
                    result = await client.read_resource("skill://blob/ref/blob.bin")
                    got.append(hashlib.sha256(base64.b64decode(blob_of(result.contents[0]))).hexdigest())

                async with anyio.create_task_group() as tg:
                    for _ in range(64):
                        tg.start_soon(read)
                # Positive control: every answer is the file, and the server still serves.
                assert got == [want] * 64
                listed = await client.call_tool("skill_list", {})
                assert not listed.is_error and listed.structured_content["total"] == 1

        anyio.run(go)
    finally:
        shutil.rmtree(root, ignore_errors=True)
