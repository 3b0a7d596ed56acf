"""A run's files come back: resource_link items in the skill_run result, read back with resources/read.

The real server over stdio, the SDK's own client, both protocol eras. The script writes a text
file, a small PNG and a nested CSV to ``SKILL_OUTPUT_DIR``, plus a link and a FIFO that must
not come back; the digests the result names match the bytes ``resources/read`` returns.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from skill_mcp.reasons import Refusal
from tests.fence.test_e2e import connect

pytestmark = [pytest.mark.slow, pytest.mark.anyio]  # slow: a server subprocess per case

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
WRITER = f"""import os, sys
out = os.environ["SKILL_OUTPUT_DIR"]
open(os.path.join(out, "report.md"), "w").write("# Report\\n" + " ".join(sys.argv[1:]) + "\\n")
open(os.path.join(out, "pixel.png"), "wb").write({PNG!r})
os.makedirs(os.path.join(out, "tables"))
open(os.path.join(out, "tables", "rows.csv"), "w").write("a,b\\n1,2\\n")
os.symlink("/etc/passwd", os.path.join(out, "passwd"))
os.mkfifo(os.path.join(out, "pipe"))
open(os.path.join(os.fsencode(out), b"odd\\xff.txt"), "wb").write(b"an undecodable name")
print("wrote", out)
"""
SKILL_MD = """---
name: writer
description: Writes a report, an image and a table.
mcp-host:
  version: 1
  run:
    - script: scripts/write.py
      interpreter: python
      timeout: 20
---
Run scripts/write.py.
"""


@pytest.fixture
def skills(root: Path) -> Path:
    (root / "writer" / "scripts").mkdir(parents=True)
    (root / "writer" / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (root / "writer" / "scripts" / "write.py").write_text(WRITER, encoding="utf-8")
    return root


async def _run(client: Client, *args: str) -> types.CallToolResult:
    first = await client.call_tool("skill_run", {"skill": "writer", "script": "scripts/write.py", "args": list(args)})
    token = (first.structured_content or {})["confirmToken"]
    return await client.call_tool(
        "skill_run", {"skill": "writer", "script": "scripts/write.py", "args": list(args), "confirmToken": token}
    )


async def test_written_files_come_back_as_resource_links_with_matching_digests(skills: Path, era: str) -> None:
    async with connect([skills], era, env={"MCP_CONFIRM_ELICITATION": "off"}) as client:
        result = await _run(client, "hello")
        assert not result.is_error, result
        sc = result.structured_content or {}
        assert sc["status"] == "ok"
        by_path = {o["path"]: o for o in sc["outputs"]}
        assert set(by_path) == {"report.md", "pixel.png", "tables/rows.csv"}
        assert by_path["pixel.png"]["mimeType"] == "image/png"
        assert by_path["tables/rows.csv"]["mimeType"] == "text/csv"
        dropped = {d["path"]: d["why"] for d in sc["outputsDropped"]["first"]}
        assert dropped == {"passwd": "link", "pipe": "not-a-regular-file", "odd\\xff.txt": "unaddressable-name"}
        links = [b for b in result.content if isinstance(b, types.ResourceLink)]
        assert {link.uri for link in links} == {o["uri"] for o in sc["outputs"]}
        for link in links:
            assert link.uri.startswith("skill-run://")
            read = await client.read_resource(link.uri)
            item = read.contents[0]
            data = (
                item.text.encode("utf-8")
                if isinstance(item, types.TextResourceContents)
                else base64.b64decode(item.blob)
            )
            entry = next(o for o in sc["outputs"] if o["uri"] == link.uri)
            assert (
                hashlib.sha256(data).hexdigest() == entry["sha256"] == (link.meta or {})["io.github.skill-mcp/sha256"]
            )
            assert len(data) == entry["size"] == link.size
        assert (await client.read_resource(by_path["report.md"]["uri"])).contents[0].text == "# Report\nhello\n"  # type: ignore[union-attr]
        listed = await client.list_resources()
        assert not any(r.uri.startswith("skill-run://") for r in listed.resources)


async def test_an_output_uri_that_was_never_issued_is_refused_with_a_reason(skills: Path, era: str) -> None:
    async with connect([skills], era, env={"MCP_CONFIRM_ELICITATION": "off"}) as client:
        result = await _run(client)
        real = (result.structured_content or {})["outputs"][0]["uri"]
        assert (await client.read_resource(real)).contents  # positive control
        forged = "skill-run://" + "0" * 32 + "/report.md"
        with pytest.raises(MCPError) as exc:
            await client.read_resource(forged)
        assert exc.value.error.code == -32602
        assert (exc.value.error.data or {})["reason"] == Refusal.OUTPUT_UNKNOWN
        with pytest.raises(MCPError) as exc:
            await client.read_resource(real.rsplit("/", 1)[0] + "/not-written.txt")
        assert (exc.value.error.data or {})["reason"] == Refusal.OUTPUT_UNKNOWN
