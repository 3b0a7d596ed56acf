"""Run outputs over Streamable HTTP: a session reads its own runs' files and no other session's.

Handshake era: outputs belong to the session that ran the script (its ``Mcp-Session-Id``), so a
second session presenting the very URI is refused (``output-unknown``). 2026-07-28 era: there
are no sessions, and the unguessable run id is what lets a client read them.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from skill_mcp.reasons import Refusal
from tests.fence.test_run_outputs_e2e import SKILL_MD, WRITER
from tests.http.harness import HttpServer, http_client, running_http_server

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.timeout(120)]  # slow: an HTTP server subprocess per case
TOKEN = "outputs-token-0123456789abcdef"


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    # World-readable, outside pytest's 0700 directory: a root server drops scripts to nobody.
    root = Path(tempfile.mkdtemp(prefix="skill-mcp-http-outputs-"))
    root.chmod(0o755)
    (root / "writer" / "scripts").mkdir(parents=True)
    (root / "writer" / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (root / "writer" / "scripts" / "write.py").write_text(WRITER, encoding="utf-8")
    try:
        with running_http_server([root], token=TOKEN, env={"MCP_CONFIRM_ELICITATION": "off"}) as srv:
            yield srv
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _run(client: Any) -> dict[str, Any]:
    args = {"skill": "writer", "script": "scripts/write.py", "args": ["over", "http"]}
    first = await client.call_tool("skill_run", args)
    done = await client.call_tool(
        "skill_run", {**args, "confirmToken": (first.structured_content or {})["confirmToken"]}
    )
    assert not done.is_error, done
    out = dict(done.structured_content or {})
    assert out["status"] == "ok", out
    return out


def _bytes(item: Any) -> bytes:
    return item.text.encode("utf-8") if isinstance(item, types.TextResourceContents) else base64.b64decode(item.blob)


async def test_a_session_reads_its_outputs_and_another_session_is_refused(server: HttpServer) -> None:
    async with http_client(server.url, token=TOKEN, mode="legacy") as mine:
        result = await _run(mine)
        png = next(o for o in result["outputs"] if o["path"] == "pixel.png")
        read = await mine.read_resource(png["uri"])
        assert hashlib.sha256(_bytes(read.contents[0])).hexdigest() == png["sha256"]  # positive control
        async with http_client(server.url, token=TOKEN, mode="legacy") as other:
            with pytest.raises(MCPError) as exc:
                await other.read_resource(png["uri"])
            assert exc.value.error.code == -32602
            assert (exc.value.error.data or {})["reason"] == Refusal.OUTPUT_UNKNOWN


async def test_without_sessions_the_run_id_is_what_reads_the_outputs(server: HttpServer) -> None:
    async with http_client(server.url, token=TOKEN, mode="2026-07-28") as first:
        result = await _run(first)
    report = next(o for o in result["outputs"] if o["path"] == "report.md")
    async with http_client(server.url, token=TOKEN, mode="2026-07-28") as later:
        read = await later.read_resource(report["uri"])
        assert _bytes(read.contents[0]) == b"# Report\nover http\n"
        with pytest.raises(MCPError) as exc:
            await later.read_resource("skill-run://" + "f" * 32 + "/report.md")
        assert (exc.value.error.data or {})["reason"] == Refusal.OUTPUT_UNKNOWN
