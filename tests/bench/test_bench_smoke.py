"""The benchmark's smoke run (N = 100, few repetitions), so ``make bench`` never rots.

It asserts shapes, never speeds: CI machines are noisy and the figures are the benchmark's
business, not the test suite's.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.corpus import generate
from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings

REPO = Path(__file__).resolve().parents[2]


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@pytest.mark.slow
def test_corpus_is_deterministic_and_served_without_problems(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", 60)
    b = generate(tmp_path / "b", 60)
    assert _tree_digest(a.root) == _tree_digest(b.root)
    assert (a.files, a.bytes, a.sample, a.scripts) == (b.files, b.bytes, b.sample, b.scripts)
    catalog = build_catalog(load_settings([str(a.root)], {}))
    assert len(catalog.skills) == 60
    assert [p.to_dict() for p in catalog.problems] == []
    sizes = [(a.root / s.name / "SKILL.md") for s in catalog.skills.values() if (a.root / s.name).is_dir()]
    assert all(2 * 1024 <= p.stat().st_size <= 20 * 1024 for p in sizes)
    assert sorted(a.scripts) == ["bash", "node", "python"]
    assert any(s.declaration is not None for s in catalog.skills.values())
    nested = [s for s in catalog.skills.values() if s.directory.parent.parent.parent == a.root]
    assert nested, "one skill in fifty sits inside another"
    assert all(len(catalog.skills[name].files) >= 8 for name in a.sample)


def test_corpus_is_reused_when_its_stamp_matches(tmp_path: Path) -> None:
    first = generate(tmp_path / "c", 20)
    marker = first.root / first.sample[0] / "SKILL.md"
    before = marker.stat().st_mtime_ns
    second = generate(tmp_path / "c", 20)
    assert marker.stat().st_mtime_ns == before
    assert second.bytes == first.bytes


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_smoke_run_writes_every_section(tmp_path: Path) -> None:
    out = tmp_path / "smoke.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--sizes",
            "100",
            "--quick",
            "--no-pack",
            "--no-appliance",
            "--cache",
            str(tmp_path / "cache"),
            "--out",
            str(out),
            "--raw",
            str(tmp_path / "raw.json"),
            "--peers-dir",
            str(tmp_path / "peers"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    raw = json.loads((tmp_path / "raw.json").read_text(encoding="utf-8"))
    assert len(raw["ready"]["100"]["ready"]) == len(raw["ready"]["floor"]["ready"]) == 3
    for heading in (
        "## Ready",
        "## Peak memory",
        "## Per-call latency: 100",
        "## In-process",
        "## The first answer, cold and warm",
        "## Peers side by side",
        "## Appliance",
        "## Load",
    ):
        assert heading in text
    for mode in ("cold", "warm"):
        # floor ready, floor ready + walk, ours ready, ours ready + walk, the paired ratio, the ratio of medians
        assert re.search(
            rf"^\| 100 \| 100 \| 1 \| {mode} \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+x \| "
            r"[\d.]+x \|",
            text,
            re.M,
        ), mode
        assert re.search(rf"^\| 100 \| ours \({mode}\) \| 100 \| [\d.]+ \| [\d.]+ \|", text, re.M), mode
    assert len(raw["first_answer"][0]["floor_walk"]) == len(raw["first_answer"][0]["warm"]["walk"]) == 1
    # No venv under this run's --peers-dir: every peer is named, as not set up, and no verdict is claimed.
    for peer in ("skills-mcp", "agent-skill-search", "skill-mcp", "skillz"):
        assert re.search(rf"^\| 100 \| {peer} \| \| \| not set up", text, re.M), peer
    assert "- first on ready + first full list answer at 100: not measured (no peer answered" in text
    ready_row = re.search(r"^\| 100 \| 100 \| ([\d.]+) \| ([\d.]+) \|", text, re.M)
    assert ready_row is not None, text
    for call in (
        "skill_list (first page)",
        "skill_load",
        "skill_file (8 paths)",
        "skills/list (each page)",
        "skills/get",
        "resources/read",
    ):
        assert re.search(rf"^\| {re.escape(call)} \| [\d.]+ \|", text, re.M), call
