"""Two appliance replicas serving ``--http`` behind Debian's HAProxy, configured as docs/deploy.md says.

The balancer's configuration is read from docs/deploy.md ("Scaling out") and run as written.
Each replica serves a skill named ``replica`` whose description names that replica, so every
answer says, from the replica's own files, which replica produced it; the replicas' own logs
name the handshake sessions each one created. Driven by the SDK's client in both protocol eras:

- 2026-07-28 requests of one client are spread over every replica;
- every request of a handshake-era session reaches the replica that created the session, and
  different sessions are created on different replicas;
- control: the same configuration without its ``stick`` rules breaks a handshake session
  (another replica answers 404), so the stickiness is what keeps sessions whole;
- a 2026-07-28 ``skill_run`` and its confirmation meet on one replica (the ``Mcp-Name`` rule),
  a handshake-era run stays in its session; control: without the rule, round-robin sends the
  confirmation to the replica that did not mint its token (``TOKEN_INVALID``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from bench.cluster import (
    PUBLIC_HOST,
    Cluster,
    ClusterSpec,
    another_balancer,
    documented_haproxy_cfg,
    running,
    server_names,
    url,
    without_run_routing,
    without_stickiness,
)
from tests.appliance.conftest import REPO, run_flags

pytestmark = pytest.mark.appliance

TOKEN = "scale-out-token-0123456789abcdef"
LB_IMAGE = os.environ.get("SKILL_MCP_LB_IMAGE", "skill-mcp-lb:dev")
WHO = re.compile(r"served by replica (skill-mcp-\d+)")
CALLS = 8
SESSIONS = 4
LEGACY_VERSION = "2025-06-18"


RUN = {"skill": "replica", "script": "scripts/where.py"}
RAN = re.compile(r"run served by replica (skill-mcp-\d+)")
RUNS = 4


def _replica_skills(root: Path, name: str) -> Path:
    skill = root / "replica"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: replica\ndescription: This answer was served by replica {name}.\n"
        "mcp-host:\n  version: 1\n  run:\n    - script: scripts/where.py\n      interpreter: python\n---\n\n"
        "Says which replica of a scaled-out deployment answered.\n",
        encoding="utf-8",
    )
    (skill / "scripts" / "where.py").write_text(f"print('run served by replica {name}')\n", encoding="utf-8")
    for path in (root, skill, skill / "scripts"):
        path.chmod(0o755)  # the server reads the mount as its own unprivileged uid
    for path in (skill / "SKILL.md", skill / "scripts" / "where.py"):
        path.chmod(0o644)
    return root


@pytest.fixture(scope="module")
def lb_image(image: str) -> str:
    proc = subprocess.run(
        ["make", "lb-image", f"PY={sys.executable}", f"LB_IMAGE={LB_IMAGE}"],
        cwd=REPO,
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return LB_IMAGE


@pytest.fixture(scope="module")
def cluster(image: str, lb_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cfg = documented_haproxy_cfg()
    names = server_names(cfg)
    assert len(names) >= 2, "the documented configuration balances at least two replicas"
    base = tmp_path_factory.mktemp("replicas")
    skills = tuple(_replica_skills(base / name, name) for name in names)
    flags = tuple(run_flags())  # the suite's copy of the documented posture
    # The owner grants the replica skill's script; confirmations use the token round trip.
    env = (("MCP_SKILL_RUN", json.dumps([RUN])), ("MCP_CONFIRM_ELICITATION", "off"))
    with running(ClusterSpec(image, skills, TOKEN, cfg, lb_image=lb_image, posture=flags, env=env)) as running_cluster:
        yield running_cluster


@asynccontextmanager
async def client(endpoint: str, mode: str, seen: list[str] | None = None) -> AsyncIterator[Any]:
    """An SDK client through the balancer, sending the public name as ``Host``; ``seen`` collects
    every ``Mcp-Session-Id`` the replicas answer with."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def note(response: Any) -> None:
        if seen is not None and (sid := response.headers.get("mcp-session-id")):
            seen.append(sid)

    headers = {"Authorization": f"Bearer {TOKEN}", "Host": PUBLIC_HOST}
    async with httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30.0, read=60.0), event_hooks={"response": [note]}
    ) as http:
        # No client-side result cache: every call must travel to a replica.
        async with Client(streamable_http_client(endpoint, http_client=http), mode=mode, cache=None) as mcp:
            yield mcp


async def who(mcp: Any) -> str:
    """Which replica answered: the description of the skill its own files hold."""
    result = await mcp.call_tool("skill_list", {})
    assert not result.is_error, result
    found = WHO.findall(json.dumps(result.structured_content))
    assert len(found) == 1, result.structured_content
    return str(found[0])


def test_2026_requests_of_one_client_are_spread_over_every_replica(cluster: Cluster) -> None:
    async def go() -> list[str]:
        async with client(cluster.url, "2026-07-28") as mcp:
            return [await who(mcp) for _ in range(CALLS)]

    answered = Counter(anyio.run(go))
    assert set(answered) == set(server_names(documented_haproxy_cfg())), answered
    assert min(answered.values()) >= CALLS // 4, answered  # balanced per request, not per client


def test_handshake_sessions_stay_on_the_replica_that_created_them(cluster: Cluster) -> None:
    async def session_calls(mcp: Any, out: list[str]) -> None:
        for _ in range(CALLS):
            out.append(await who(mcp))

    async def go() -> list[tuple[list[str], list[str]]]:
        runs: list[tuple[list[str], list[str]]] = [([], []) for _ in range(SESSIONS)]
        async with AsyncExitStack() as stack:
            # Sessions are opened one after another (each initialize is balanced), then called
            # concurrently, so their requests interleave at the balancer.
            clients = [await stack.enter_async_context(client(cluster.url, "legacy", sids)) for sids, _ in runs]
            async with anyio.create_task_group() as tg:
                for mcp, (_, answers) in zip(clients, runs, strict=True):
                    tg.start_soon(session_calls, mcp, answers)
        return runs

    runs = anyio.run(go)
    owners = []
    for sids, answers in runs:
        assert len(set(answers)) == 1 and len(answers) == CALLS, answers  # one replica, every call answered
        owner = answers[0]
        assert len(set(sids)) == 1, sids  # one session id throughout
        # The replica's own log: the session was created there and nowhere else.
        created = [name for name in cluster.replicas if f"session ID: {sids[0]}" in cluster.logs(name)]
        assert created == [c for c in cluster.replicas if c.startswith(f"{owner}-")], (created, owner)
        owners.append(owner)
    assert len(set(owners)) >= 2, owners  # the sessions themselves were spread


def _raw_session(port: int) -> list[int]:
    """A handshake session by hand: initialize, then the initialized notification and four
    tools/list requests carrying its id. Returns every status, initialize's first."""
    import httpx2

    base = {
        "Authorization": f"Bearer {TOKEN}",
        "Host": PUBLIC_HOST,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "scale-out-test", "version": "0"},
        },
    }
    with httpx2.Client(timeout=30) as http:
        first = http.post(url(port), json=init, headers=base)
        sid = first.headers.get("mcp-session-id")
        assert first.status_code == 200 and sid, (first.status_code, first.text[:500])
        headers = {**base, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY_VERSION}
        statuses = [
            first.status_code,
            http.post(
                url(port), json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            ).status_code,
        ]
        for i in range(1, 5):
            statuses.append(
                http.post(
                    url(port), json={"jsonrpc": "2.0", "id": i, "method": "tools/list"}, headers=headers
                ).status_code
            )
    return statuses


def test_without_the_stick_rules_a_handshake_session_breaks(cluster: Cluster) -> None:
    # Positive control: through the documented balancer every request of the session is answered.
    assert _raw_session(cluster.port) == [200, 202, 200, 200, 200, 200]
    # The denial: round-robin alone sends the session's requests to a replica that never saw it.
    with another_balancer(cluster, without_stickiness(documented_haproxy_cfg())) as port:
        statuses = _raw_session(port)
    assert 404 in statuses[1:], statuses


async def run_confirmed(mcp: Any) -> dict[str, Any]:
    """A preview, then its confirmation with the token it gave; the final answer."""
    first = await mcp.call_tool("skill_run", RUN)
    body = dict(first.structured_content or {})
    assert body.get("status") == "confirmation-required" and body.get("confirmToken"), body
    done = await mcp.call_tool("skill_run", {**RUN, "confirmToken": body["confirmToken"]})
    return dict(done.structured_content or {})


def _ran_on(answers: list[dict[str, Any]]) -> set[str]:
    """The replicas whose script printed each answer's stdout (every run must have succeeded)."""
    assert all(a.get("status") == "ok" for a in answers), answers
    return {name for a in answers for name in RAN.findall(a["stdout"])}


def test_a_2026_run_is_confirmed_on_the_replica_that_previewed_it(cluster: Cluster) -> None:
    async def runs(endpoint: str, mode: str) -> list[dict[str, Any]]:
        async with client(endpoint, mode) as mcp:
            return [await run_confirmed(mcp) for _ in range(RUNS)]

    # Every 2026-07-28 run goes to one replica, the first of the runs backend, and runs there.
    first = server_names(documented_haproxy_cfg())[0]
    assert _ran_on(anyio.run(runs, cluster.url, "2026-07-28")) == {first}
    # A handshake-era session keeps its run on its own replica (the rule leaves sessions alone).
    assert len(_ran_on(anyio.run(runs, cluster.url, "legacy"))) == 1
    # The denial, without the rule: round-robin takes each confirmation to the other replica,
    # which never minted its token.
    with another_balancer(cluster, without_run_routing(documented_haproxy_cfg())) as port:
        refused = anyio.run(runs, url(port), "2026-07-28")
    assert any(r.get("reason") == "TOKEN_INVALID" for r in refused), refused
