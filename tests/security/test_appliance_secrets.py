"""The owner's secret values never enter the appliance's server process; the granted script gets them.

A fresh canary is granted to the probe (``SEC_CANARY`` in the container's environment and in
``MCP_SKILL_RUN``). The launcher keeps the value and hands it only to the script it spawns; the
server, which parses everything untrusted, is started without it and knows the name only. The
canary is looked for everywhere the server uid can see: its environment, its memory (every
readable mapping, read through ``/proc/<pid>/mem`` by a root sidecar container in the appliance's
pid namespace; ``docker exec`` cannot add the capability under no-new-privileges), the
container's logs and every answer of a session. Positive controls: the same scans find the canary
in the launcher (which holds it) and find the server's own, ungranted ``SEC_SERVER_SECRET`` in
the server's memory; and the script proves it received the value by its SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.security.appliance import GRANT, PROBE_SKILL, SECRET, AppServer, host_status, open_appliance
from tests.security.harness import last_json

pytestmark = pytest.mark.appliance

CANARY = "owner-canary-" + secrets.token_hex(12)
# Reads every readable mapping of a pid through /proc/<pid>/mem and counts each needle (hex).
SCAN = r"""
import json, re, sys
pid, needles = sys.argv[1], [bytes.fromhex(h) for h in sys.argv[2:]]
hits = [0] * len(needles)
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
        start, end, perms = int(m[1], 16), int(m[2], 16), m[3]
        if perms[0] != "r" or "[vvar" in line or "[vsyscall" in line:
            continue
        try:
            mem.seek(start)
            data = mem.read(end - start)
        except OSError:
            continue
        for i, n in enumerate(needles):
            hits[i] += data.count(n)
print(json.dumps(hits))
"""


def _grant() -> str:
    rows = json.loads(GRANT)
    for row in rows:
        if row["script"] == "scripts/probe.py":
            row["env"] = ["SEC_CANARY"]
    return json.dumps(rows)


@pytest.fixture(scope="module")
def canary_app(image: str, peers: dict[str, Any], rebind_dns: dict[str, Any]) -> Iterator[AppServer]:
    name = f"skill-mcp-canary-{os.getpid()}-{secrets.token_hex(3)}"
    with open_appliance(
        image,
        name,
        network=peers["network"],
        dns=rebind_dns["ip"],
        env={"MCP_SKILL_RUN": _grant(), "SEC_CANARY": CANARY, "SKILL_MCP_LOG": "info"},
    ) as app:
        yield app


def _memory_hits(app: AppServer, ns_pid: int, *needles: str) -> list[int]:
    """Scan from a root sidecar in the appliance's pid namespace, with the one capability it needs."""
    image = subprocess.run(
        ["docker", "inspect", "-f", "{{.Config.Image}}", app.name],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    proc = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--pid",
            f"container:{app.name}",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "SYS_PTRACE",
            "--network",
            "none",
            "--entrypoint",
            "/usr/bin/python3",
            image,
            "-c",
            SCAN,
            str(ns_pid),
            *(n.encode().hex() for n in needles),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return list(json.loads(proc.stdout))


def _answers_of_a_session(app: AppServer) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """Every tool's answer over one session, as the client received it, plus the preview and the run."""
    session = app.session
    answers = [json.dumps([t.model_dump(mode="json") for t in session.portal.call(session.client.list_tools).tools])]
    for tool, args in (
        ("skill_list", {}),
        ("skill_load", {"name": PROBE_SKILL}),
        ("skill_file", {"name": PROBE_SKILL, "paths": ["SKILL.md", "scripts/probe.py"]}),
        ("skill_search", {"query": "security probe"}),
    ):
        answers.append(json.dumps(session.call(tool, args)))
    err, preview = session.preview(PROBE_SKILL, "scripts/probe.py", ["envhash", "SEC_CANARY"])
    assert not err, preview
    answers.append(json.dumps(preview))
    err, result = session.call(
        "skill_run",
        {
            "skill": PROBE_SKILL,
            "script": "scripts/probe.py",
            "args": ["envhash", "SEC_CANARY"],
            "confirmToken": preview["confirmToken"],
        },
    )
    assert not err, result
    answers.append(json.dumps(result))
    return answers, preview, result


def test_owner_secret_is_nowhere_the_server_uid_can_see(canary_app: AppServer) -> None:
    answers, preview, result = _answers_of_a_session(canary_app)
    # Positive control: the granted script received the value (its hash, never the value, comes back).
    assert last_json(result["stdout"]) == {"present": True, "sha256": hashlib.sha256(CANARY.encode()).hexdigest()}
    # The server knew the name only, and its preview says the variable will be handed.
    fields = {f["name"]: f for f in preview["preview"]["willRun"]["env"]}
    assert fields["SEC_CANARY"]["present"] is True

    # Its answers.
    assert not [a for a in answers if CANARY in a]
    # Its environment block, read by the host's root (no kernel check stops that reader).
    server = canary_app.server_pid()
    with open(f"/proc/{server}/environ", "rb") as fh:
        assert CANARY.encode() not in fh.read()
    # Its memory, every readable mapping; the launcher (PID 1) holds the value, the server its own secret.
    server_ns = int(host_status(server)["NSpid"])
    assert _memory_hits(canary_app, server_ns, CANARY, SECRET)[0] == 0
    assert _memory_hits(canary_app, server_ns, SECRET)[0] > 0  # positive control: the scan sees the heap
    assert _memory_hits(canary_app, 1, CANARY)[0] > 0  # positive control: the scan finds this very value
    # Its logs: the container's stderr (the server's audit lines and the launcher's).
    logs = subprocess.run(["docker", "logs", canary_app.name], capture_output=True, timeout=60, check=True)
    text = (logs.stdout + logs.stderr).decode(errors="replace")
    assert "skill_run" in text  # positive control: the run was logged
    assert CANARY not in text
