"""``skill-mcp call skill_run --out DIR`` saves the files the script wrote, and only under DIR."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.cli.helpers import run

pytestmark = pytest.mark.slow  # every case starts a server or a CLI subprocess


def test_call_skill_run_out_saves_the_bundled_reports_files(tmp_path: Path) -> None:
    out = tmp_path / "saved"
    args = {"skill": "write-a-run-report", "script": "scripts/report.py", "args": ["apples=3", "pears=5"]}
    done = run("call", "skill_run", "--args", json.dumps(args), "--yes", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["report.md", "table.csv"]
    assert (out / "table.csv").read_text(encoding="utf-8").splitlines() == ["name,value", "apples,3", "pears,5"]
    assert "saved 2 output file(s)" in done.stderr


def test_call_skill_run_json_names_each_output_with_its_digest(tmp_path: Path) -> None:
    args = {"skill": "write-a-run-report", "script": "scripts/report.py", "args": ["a=1"]}
    done = run("call", "skill_run", "--args", json.dumps(args), "--yes", "--json", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    outputs = {o["path"]: o for o in result["structuredContent"]["outputs"]}
    saved = tmp_path / "o" / "report.md"
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == outputs["report.md"]["sha256"]
    assert [b["type"] for b in result["content"]].count("resource_link") == 2
