"""The official TypeScript SDK's client gets every answer as a result, refusals included.

That client (the MCP Inspector is built on it) checks ``structuredContent`` against the tool's
``outputSchema`` on error results as well; while the advertised schemas required the success
fields only, every refusal reached its user as a thrown -32602 instead of the tool error with a
``reason``. Uses the SDK pinned in tools/conformance (``npm ci`` there, as for the conformance
suite); skips without it locally and fails under CI.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.harness import build_tree
from tests.serve import serve_argv

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "conformance"
NODE = TOOLS / "node_modules" / ".bin" / "node"
SDK = TOOLS / "node_modules" / "@modelcontextprotocol" / "sdk"
CLIENT = Path(__file__).resolve().parent / "ts_client.mjs"

pytestmark = pytest.mark.timeout(180)


def _toolchain_or_skip() -> None:
    if NODE.exists() and (SDK / "package.json").exists():
        return
    message = "TypeScript SDK missing: run .ci/setup.d/node.sh (npm ci in tools/conformance)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def test_the_typescript_sdk_client_gets_refusals_as_tool_errors_with_their_reason(tmp_path: Path) -> None:
    _toolchain_or_skip()
    root = build_tree(tmp_path / "skills")
    done = subprocess.run(
        [str(NODE), str(CLIENT), str(SDK), *serve_argv([root])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert {"skill_list", "skill_load", "skill_file", "skill_run", "skill_search"} <= set(out["tools"])
    by_call = [(c["name"], c.get("isError"), c.get("reason"), c.get("thrown")) for c in out["calls"]]
    assert by_call == [
        ("skill_list", False, None, None),  # positive controls: results that succeed
        ("skill_load", False, None, None),
        ("skill_load", True, "unknown-skill", None),
        ("skill_file", False, None, None),  # one bad path fails only its entry
        ("skill_file", True, "too-many-paths", None),
        ("skill_run", True, "TOKEN_INVALID", None),
        ("skill_search", True, "invalid-arguments", None),
    ], out["calls"]
