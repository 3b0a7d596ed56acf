"""Every read surface answers the same over Streamable HTTP as over stdio, in both eras.

One walk over the conformance corpus collects what a client can see: the tool, prompt and
resource listings, every resource read, skills/list, skills/get and resources/directory/read
for every skill, and the read tools' answers. The walk runs over stdio and over HTTP (the real
server in a subprocess each time) and the two snapshots must be equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.http.harness import http_client, running_http_server
from tests.integration.harness import directory_read, skills_get, skills_list
from tests.serve import stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120), pytest.mark.slow]
TOKEN = "parity-token-0123456789abcdef"
CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _walk(client: Client) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    seen["tools"] = sorted((_dump(t) for t in (await client.list_tools()).tools), key=lambda t: t["name"])
    seen["prompts"] = [_dump(p) for p in (await client.list_prompts()).prompts]
    resources = (await client.list_resources()).resources
    seen["resources"] = [_dump(r) for r in resources]
    for resource in resources:
        seen[f"read {resource.uri}"] = [_dump(c) for c in (await client.read_resource(resource.uri)).contents]
    listing = await skills_list(client)
    seen["skills/list"] = listing
    for entry in listing["skills"]:
        seen[f"get {entry['uri']}"] = await skills_get(client, entry["uri"])
        root = entry["uri"].removesuffix("/SKILL.md")
        seen[f"dir {root}"] = await directory_read(client, root)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("skill_list", {}),
        ("skill_load", {"name": "alpha-tools"}),
        ("skill_file", {"name": "alpha-tools", "paths": ["references/GUIDE.md", "scripts/hello.py", "nope.txt"]}),
    ]
    for name, arguments in calls:
        result = await client.call_tool(name, arguments)
        seen[f"call {name}"] = {"isError": bool(result.is_error), "structured": result.structured_content}
    return seen


def _stdio(era: str) -> Client:
    return Client(stdio_params([CORPUS]), mode=era, read_timeout_seconds=30)


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_http_answers_every_read_surface_exactly_as_stdio(era: str) -> None:
    async with _stdio(era) as client:
        over_stdio = await _walk(client)
    with running_http_server([CORPUS], token=TOKEN) as server:
        async with http_client(server.url, token=TOKEN, mode=era) as client:
            over_http = await _walk(client)
    assert len(over_stdio) > 10  # the walk reached every kind of surface
    assert over_http.keys() == over_stdio.keys()
    for key in over_stdio:
        assert over_http[key] == over_stdio[key], key
