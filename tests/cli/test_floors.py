"""``validate --strict``: each floor fires on a skill that misses it, and not on one that meets it."""

from __future__ import annotations

from pathlib import Path

import pytest

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.reasons import Level, ProblemReason
from skill_mcp.validate import FLOORS, credential_findings, validate_catalog
from tests.cli.helpers import as_json, run, write

GOOD_DESCRIPTION = "Turns meeting notes into a short written report. Use when someone asks for a report."
GOOD_BODY = "# Report\n\n1. Read the notes.\n2. Write the report.\n"


def _skill(root: Path, description: str = GOOD_DESCRIPTION, body: str = GOOD_BODY, extra: str = "") -> Path:
    write(root / "demo" / "SKILL.md", f"---\nname: demo\ndescription: {description}\n{extra}---\n{body}")
    return root


def _floor_reasons(root: Path) -> list[ProblemReason]:
    catalog = build_catalog(load_settings([str(root)], {}))
    assert "demo" in catalog.skills
    return [p.reason for p in validate_catalog(catalog, strict=True) if p.reason in FLOORS]


def test_a_skill_that_meets_every_floor_has_no_floor_problem(tmp_path: Path) -> None:
    assert _floor_reasons(_skill(tmp_path)) == []


CASES = [
    (ProblemReason.FLOOR_DESCRIPTION_WHEN, {"description": "Turns meeting notes into a short written report for teams."}),
    (ProblemReason.FLOOR_DESCRIPTION_SHORT, {"description": "Use when reporting."}),
    (ProblemReason.FLOOR_NO_STEPS, {"body": "# Report\n\nThis skill is about reports in general.\n"}),
    (ProblemReason.FLOOR_BODY_TOO_LONG, {"body": GOOD_BODY + "text\n" * 501}),
    (ProblemReason.FLOOR_MISSING_REFERENCE, {"body": GOOD_BODY + "See [the guide](references/guide.md).\n"}),
    (ProblemReason.FLOOR_MISSING_REFERENCE, {"body": GOOD_BODY + "Run `scripts/make.py` first.\n"}),
    (ProblemReason.FLOOR_INTERPRETER, {"extra": "mcp-host:\n  version: 1\n  run:\n    - script: run.rb\n"
                                                "      interpreter: ruby\n"}),
    (ProblemReason.CREDENTIAL_LIKE, {"body": GOOD_BODY + "Use key AKIAABCDEFGHIJKLMNOP here.\n"}),
]


@pytest.mark.parametrize(("reason", "change"), CASES, ids=[f"{r.value}-{i}" for i, (r, _) in enumerate(CASES)])
def test_each_floor_fires_on_the_skill_that_misses_it(tmp_path: Path, reason: ProblemReason,
                                                      change: dict[str, str]) -> None:
    root = _skill(tmp_path, **change)
    if reason == ProblemReason.FLOOR_INTERPRETER:
        write(root / "demo" / "run.rb", "puts 1\n")
    assert reason in _floor_reasons(root)


def test_a_reference_that_exists_meets_the_floor(tmp_path: Path) -> None:
    root = _skill(tmp_path, body=GOOD_BODY + "See [the guide](references/guide.md) and `scripts/make.py`.\n")
    write(root / "demo" / "references" / "guide.md", "x\n")
    write(root / "demo" / "scripts" / "make.py", "x\n")
    assert _floor_reasons(root) == []


def test_floors_are_errors_with_a_fix_hint_and_only_under_strict(tmp_path: Path) -> None:
    root = _skill(tmp_path, description="Turns meeting notes into a report for the whole team.")
    catalog = build_catalog(load_settings([str(root)], {}))
    assert validate_catalog(catalog, strict=False) == list(catalog.problems)
    floor = [p for p in validate_catalog(catalog, strict=True) if p.reason in FLOORS]
    assert floor and all(p.level == Level.ERROR and "fix:" in p.detail and p.skill == "demo" for p in floor)


def test_strict_validate_through_the_cli_fails_and_names_the_floor(tmp_path: Path) -> None:
    root = _skill(tmp_path, body="# Report\n\nNo steps here.\n")
    assert run("validate", str(root)).returncode == 0
    done = run("validate", "--strict", "--json", str(root))
    assert done.returncode == 1
    assert [p["reason"] for p in as_json(done)["problems"]] == ["floor-no-steps"]


@pytest.mark.parametrize(
    "text",
    [
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_" + "a1" * 18,
        "xoxb-1234567890-abcdef",
        "sk-ant-api03-" + "x1" * 12,
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        'api_key = "q8Zr2LmN5vT1wX9yK3bH7dF4"',
        "password: Sup3rS3cretValue2024abc",
    ],
)
def test_credential_patterns_are_recognised(text: str) -> None:
    assert credential_findings(text)


@pytest.mark.parametrize(
    "text",
    [
        "export GITHUB_TOKEN=$GITHUB_TOKEN",
        "Authorization: Bearer ${MCP_HTTP_TOKEN}",
        'api_key = "<your-api-key-here-please>"',
        "token: xxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "password: correct-horse-battery-staple",  # no digit: reads as prose, not a secret
        "Set MCP_HTTP_TOKEN in the environment; never write the token itself here.",
    ],
)
def test_placeholders_and_variable_names_are_not_credentials(text: str) -> None:
    assert credential_findings(text) == []
