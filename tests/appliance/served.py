"""The appliance's server over stdio for the SDK's client: ``docker run -i`` with the documented
flags (the image starts the launcher, which starts ``skill-mcp serve``), and a confirmed run.

Shared by the appliance modules that talk to the server (``test_server``, ``test_isolation``,
``test_selftest``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import Client, StdioServerParameters

from tests.appliance.conftest import CAPS, SKILLS_MOUNT, run_flags

PROBE = {"skill": "probe", "script": "scripts/probe.py"}


def _params(
    image: str,
    env: dict[str, str],
    *,
    caps: tuple[str, ...] = CAPS,
    extra: tuple[str, ...] = (),
    mounts: tuple[str, ...] = tuple(SKILLS_MOUNT),
) -> StdioServerParameters:
    """``mounts``: what is mounted at ``/skills`` (the suite's skills unless a test brings its own)."""
    args = ["run", "-i", "--rm", *run_flags(caps), *extra, *mounts]
    for key, value in {"MCP_CONFIRM_ELICITATION": "off", "SKILL_MCP_LOG": "warning", **env}.items():
        args += ["-e", f"{key}={value}"]
    return StdioServerParameters(command="docker", args=[*args, image])


@asynccontextmanager
async def served(image: str, env: dict[str, str] | None = None, **kw: Any) -> AsyncIterator[Client]:
    async with Client(_params(image, env or {}, **kw), mode="legacy", read_timeout_seconds=90) as client:
        yield client


async def run_confirmed(client: Client, args: list[str], skill: str = "probe") -> dict[str, Any]:
    call = {**PROBE, "skill": skill, "args": args}
    first = await client.call_tool("skill_run", call)
    body = first.structured_content or {}
    if "confirmToken" not in body:
        return body
    done = await client.call_tool("skill_run", {**call, "confirmToken": body["confirmToken"]})
    return done.structured_content or {}


def grant(*rows: dict[str, Any]) -> dict[str, str]:
    return {"MCP_SKILL_RUN": json.dumps(list(rows))}
