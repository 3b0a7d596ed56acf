"""Every answer that carries large file content reserves it first, and says ``answers-busy`` in
its own form when it cannot (``surfaces.answer_bytes``, through ``state.hold_answer_bytes``).

The reservation's own behaviour is ``test_answer_bytes.py``; its effect on a real server's memory
is ``test_answer_memory.py``. Here, through the SDK's in-memory client in both eras: which
answers reserve and how much (the sizes the scan saw, before anything is opened), that small
answers reserve nothing, and that a refused reservation reaches the client as a tool error with
the reason (tools) or as ``-32602`` with ``data.reason`` (``resources/read``, ``prompts/get``),
with the server still serving the next call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.answer_bytes import AnswerBytes
from skill_mcp.surfaces.state import INLINE_READ_BYTES
from tests.helpers import write_skill
from tests.integration.harness import in_process

pytestmark = pytest.mark.anyio

BIG_MD = 600_000  # a SKILL.md over the inline read, under the 1 MiB cap
PART = 300_000  # each of two files of one skill_file batch
BLOB = 2_000_000


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    big = write_skill(root, "big", description="A skill with large files.", body="# Big\n" + "word " * (BIG_MD // 5))
    (big / "ref").mkdir()
    (big / "ref" / "a.md").write_text("a" * PART)
    (big / "ref" / "b.md").write_text("b" * PART)
    (big / "ref" / "blob.bin").write_bytes(b"\x00\xff" * (BLOB // 2))
    (big / "ref" / "small.md").write_text("small")
    write_skill(root, "tiny", description="A small skill.")
    return root


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The sizes every reservation asked for (the real reservation still made)."""
    asked: list[int] = []
    real = AnswerBytes.hold

    async def spy(self: AnswerBytes, nbytes: int, owner: Any = None) -> None:
        asked.append(nbytes)
        await real(self, nbytes, owner)

    monkeypatch.setattr(AnswerBytes, "hold", spy)
    yield asked


def _size(root: Path, rel: str) -> int:
    return (root / "big" / rel).stat().st_size


async def test_each_large_answer_reserves_what_the_scan_saw(root: Path, era: str, held: list[int]) -> None:
    async with in_process(root, era) as client:
        result = await client.read_resource("skill://big/ref/blob.bin")
        assert held == [BLOB] and len(result.contents) == 1
        result2 = await client.call_tool("skill_file", {"name": "big", "paths": ["ref/a.md", "ref/b.md"]})
        assert not result2.is_error and held[1:] == [2 * PART]
        result3 = await client.call_tool("skill_load", {"name": "big"})
        assert not result3.is_error and held[2:] == [_size(root, "SKILL.md")]
        prompt = await client.get_prompt("big")
        assert prompt.messages and held[3:] == [_size(root, "SKILL.md")]
        assert _size(root, "SKILL.md") > INLINE_READ_BYTES


async def test_small_answers_reserve_nothing(root: Path, era: str, held: list[int]) -> None:
    async with in_process(root, era) as client:
        await client.read_resource("skill://big/ref/small.md")
        await client.call_tool("skill_file", {"name": "big", "paths": ["ref/small.md", "nope.md"]})
        await client.call_tool("skill_load", {"name": "tiny"})
        await client.get_prompt("tiny")
        await client.read_resource("skill://tiny/SKILL.md")
        assert held == []


async def test_a_busy_refusal_reaches_the_client_in_each_answers_own_form(
    root: Path, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def busy(self: AnswerBytes, nbytes: int, owner: Any = None) -> None:
        raise SkillMcpError(Refusal.ANSWERS_BUSY, "busy", {"bytes": nbytes})

    monkeypatch.setattr(AnswerBytes, "hold", busy)
    async with in_process(root, era) as client:
        for name, args in (
            ("skill_file", {"name": "big", "paths": ["ref/a.md", "ref/b.md"]}),
            ("skill_load", {"name": "big"}),
        ):
            result = await client.call_tool(name, args)
            assert result.is_error and result.structured_content["reason"] == "answers-busy", name
        for read in (lambda: client.read_resource("skill://big/ref/blob.bin"), lambda: client.get_prompt("big")):
            with pytest.raises(MCPError) as refused:
                await read()
            assert refused.value.code == -32602 and refused.value.error.data["reason"] == "answers-busy"
        # The control: a small answer is not held back, and the server still serves.
        small = await client.call_tool("skill_file", {"name": "big", "paths": ["ref/small.md"]})
        assert not small.is_error and small.structured_content["served"] == 1
