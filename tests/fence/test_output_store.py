"""Run outputs are kept for a bounded time and memory and read back only by their own scope."""

from __future__ import annotations

import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp.outputs import Collected, OutputFile
from skill_mcp.reasons import Refusal
from skill_mcp.runner.output_store import OutputStore, output_uri, parse_output_uri


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _run(*sizes: int) -> Collected:
    return Collected(tuple(OutputFile(f"f{i}.bin", b"x" * n, "00") for i, n in enumerate(sizes)))


def _reason(exc: pytest.ExceptionInfo[SkillMcpError]) -> str:
    return str(exc.value.reason)


def test_a_stored_run_reads_back_by_its_uri() -> None:
    store = OutputStore(clock=Clock())
    run = store.put(_run(3, 4), scope=None)
    assert run is not None and len(run.run_id) == 32
    assert store.read(run.uri(run.files[1]), None).data == b"xxxx"


def test_another_sessions_run_is_unknown_to_this_session() -> None:
    store = OutputStore(clock=Clock())
    run = store.put(_run(3), scope="session-a")
    assert run is not None
    assert store.read(run.uri(run.files[0]), "session-a").size == 3  # positive control
    with pytest.raises(SkillMcpError) as exc:
        store.read(run.uri(run.files[0]), "session-b")
    assert _reason(exc) == Refusal.OUTPUT_UNKNOWN


def test_an_expired_run_is_named_expired_and_a_forged_id_unknown() -> None:
    clock = Clock()
    store = OutputStore(retain_s=900, clock=clock)
    run = store.put(_run(3), scope=None)
    assert run is not None
    clock.now += 901
    with pytest.raises(SkillMcpError) as exc:
        store.read(run.uri(run.files[0]), None)
    assert _reason(exc) == Refusal.OUTPUT_EXPIRED and store.bytes_held == 0
    with pytest.raises(SkillMcpError) as exc:
        store.read(output_uri("0" * 32, "f0.bin"), None)
    assert _reason(exc) == Refusal.OUTPUT_UNKNOWN


def test_the_oldest_run_goes_first_when_memory_runs_out() -> None:
    store = OutputStore(retain_bytes=10, clock=Clock())
    first = store.put(_run(6), None)
    second = store.put(_run(6), None)
    assert first is not None and second is not None and store.bytes_held == 6
    with pytest.raises(SkillMcpError) as exc:
        store.read(first.uri(first.files[0]), None)
    assert _reason(exc) == Refusal.OUTPUT_EXPIRED
    assert store.read(second.uri(second.files[0]), None).size == 6


def test_a_run_larger_than_the_whole_budget_keeps_nothing() -> None:
    store = OutputStore(retain_bytes=10, clock=Clock())
    assert store.put(_run(11), None) is None and store.bytes_held == 0
    assert store.put(Collected(), None) is None


@pytest.mark.parametrize(
    "uri",
    [
        "skill-run://short/x",
        "skill://pdf/SKILL.md",
        "skill-run://" + "g" * 32 + "/x",
        "skill-run://" + "a" * 32,
        "skill-run://" + "a" * 32 + "/",
    ],
)
def test_malformed_output_uris_do_not_parse(uri: str) -> None:
    assert parse_output_uri(uri) is None
    assert parse_output_uri(output_uri("a" * 32, "dir/f.txt")) == ("a" * 32, "dir/f.txt")
