"""The hosts' own verifiers accept everything the Skills extension publishes.

The MCP Inspector's ``--verify`` (over stdio in both eras, and over Streamable HTTP) and
FastMCP's client (``list_skills()``, ``get_skill()``, ``read_skill()`` for every listed skill,
over stdio and HTTP) against the bundled pack and the trap corpus: zero verifier errors, and
exactly the conforming skills listed. ``SKILL_MCP_PUBLIC_SKILLS`` (as in
tests/cli/test_public_collections.py) adds the three public collections.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skill_mcp.config import BUNDLED_ROOT
from tests.http.harness import running_http_server
from tests.serve import serve_argv
from tests.verifiers.judges import fastmcp_check, inspector_verify, stdio_transport
from tests.verifiers.traps import PUBLISHED_URIS, build_traps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PUBLIC = os.environ.get("SKILL_MCP_PUBLIC_SKILLS")
# The roots of each public collection, as a user would point the server at them.
COLLECTIONS = {
    "anthropics+skills": ["skills"],
    "obra+superpowers": ["skills"],
    "openai+skills": ["skills/.curated", "skills/.experimental", "skills/.system"],
}
BUNDLED_COUNT = sum(1 for p in Path(BUNDLED_ROOT).iterdir() if (p / "SKILL.md").is_file())


@pytest.fixture(scope="module")
def traps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_traps(tmp_path_factory.mktemp("traps") / "skills")


def _roots(which: str, traps: Path) -> list[Path]:
    if which == "bundled":
        return [Path(BUNDLED_ROOT)]
    if which == "traps":
        return [traps]
    if not PUBLIC:
        pytest.skip("SKILL_MCP_PUBLIC_SKILLS is not set (opt-in corpus check)")
    base = Path(PUBLIC) / which
    return [base / d for d in COLLECTIONS[which] if (base / d).is_dir()]


CORPORA = ["bundled", "traps", *sorted(COLLECTIONS)]


def _expect(which: str, uris: set[str]) -> None:
    if which == "traps":
        assert uris == PUBLISHED_URIS
    elif which == "bundled":
        assert len(uris) == BUNDLED_COUNT
    else:
        assert uris, which


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("which", CORPORA)
def test_inspector_verify_passes_over_stdio(which: str, era: str, traps: Path, tmp_path: Path) -> None:
    verdict = inspector_verify(serve_argv(_roots(which, traps)), tmp_path, era=era)
    assert verdict.returncode == 0, (verdict.failures(), verdict.stderr[-3000:])
    assert verdict.failures() == []
    _expect(which, {r["uri"] for r in verdict.reports})


@pytest.mark.parametrize("which", CORPORA)
def test_inspector_verify_passes_over_http(which: str, traps: Path, tmp_path: Path) -> None:
    with running_http_server(_roots(which, traps), no_auth=True) as server:
        verdict = inspector_verify(["--transport", "http", "--server-url", server.url], tmp_path, era="modern")
    assert verdict.returncode == 0, (verdict.failures(), verdict.stderr[-3000:])
    _expect(which, {r["uri"] for r in verdict.reports})


@pytest.mark.anyio
@pytest.mark.parametrize("which", CORPORA)
async def test_fastmcp_lists_gets_and_reads_every_skill_over_stdio(which: str, traps: Path, tmp_path: Path) -> None:
    with (tmp_path / "server.log").open("w", encoding="utf-8") as log:
        read = await fastmcp_check(stdio_transport(_roots(which, traps), log))
    _expect(which, set(read))
    assert all(uri.rsplit("/", 2)[-2] == name for uri, name in read.items())


@pytest.mark.anyio
@pytest.mark.parametrize("which", ["bundled", "traps"])
async def test_fastmcp_lists_gets_and_reads_every_skill_over_http(which: str, traps: Path) -> None:
    with running_http_server(_roots(which, traps), no_auth=True) as server:
        read = await fastmcp_check(server.url)
    _expect(which, set(read))
