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
    (
        ProblemReason.FLOOR_DESCRIPTION_WHEN,
        {"description": "Turns meeting notes into a short written report for teams."},
    ),
    (ProblemReason.FLOOR_DESCRIPTION_SHORT, {"description": "Use when reporting."}),
    (ProblemReason.FLOOR_NO_STEPS, {"body": "# Report\n\nThis skill is about reports in general.\n"}),
    (ProblemReason.FLOOR_BODY_TOO_LONG, {"body": GOOD_BODY + "text\n" * 501}),
    (ProblemReason.FLOOR_MISSING_REFERENCE, {"body": GOOD_BODY + "See [the guide](references/guide.md).\n"}),
    (ProblemReason.FLOOR_MISSING_REFERENCE, {"body": GOOD_BODY + "Run `scripts/make.py` first.\n"}),
    (ProblemReason.FLOOR_REFERENCE_OUTSIDE_SKILL, {"body": GOOD_BODY + "See [it](../other/guide.md).\n"}),
    (ProblemReason.CREDENTIAL_LIKE, {"body": GOOD_BODY + "Use key AKIAABCDEFGHIJKLMNOP here.\n"}),
]


@pytest.mark.parametrize(("reason", "change"), CASES, ids=[f"{r.value}-{i}" for i, (r, _) in enumerate(CASES)])
def test_each_floor_fires_on_the_skill_that_misses_it(
    tmp_path: Path, reason: ProblemReason, change: dict[str, str]
) -> None:
    assert reason in _floor_reasons(_skill(tmp_path, **change))


# Each form of saying *when* that real published skills use (reworded here). A floor that fired
# on these would be a false error an author learns to ignore.
SAYS_WHEN = [
    "Turns meeting notes into a report. Use when someone asks for a report.",
    "You must use this before any design work - features, components, new behaviour.",
    "Guidance for distinctive page layouts when building a new screen or reworking one.",
    "Use this skill any time a slide deck is read, written or converted.",
    "Use this skill whenever the user wants to edit a spreadsheet or fix its formulas.",
    "Reference for the billing API. TRIGGER - read this before opening the billing client.",
    "Formats the changelog; run it after a release branch is cut and before tagging.",
    "Drafts a reply to review comments if the user asks to address a pull request review.",
    "Use for complex front-end artifacts that need state management or routing.",
]
SAYS_ONLY_WHAT = [
    "Toolkit for exercising local web applications with a headless browser and its logs.",
    "Helps address review comments on the open pull request using the gh command line.",
    "A collection of colour themes and font pairings for slides, documents and pages.",
]


@pytest.mark.parametrize("description", SAYS_WHEN)
def test_a_description_that_says_when_in_other_words_meets_the_when_floor(tmp_path: Path, description: str) -> None:
    assert ProblemReason.FLOOR_DESCRIPTION_WHEN not in _floor_reasons(_skill(tmp_path, description=description))


@pytest.mark.parametrize("description", SAYS_ONLY_WHAT)
def test_a_description_that_says_only_what_misses_the_when_floor(tmp_path: Path, description: str) -> None:
    assert ProblemReason.FLOOR_DESCRIPTION_WHEN in _floor_reasons(_skill(tmp_path, description=description))


def test_a_process_heading_with_prose_steps_meets_the_steps_floor(tmp_path: Path) -> None:
    body = "# Design\n\n## Process: plan, build, critique\n\nFirst plan the page. Then build it.\n"
    assert _floor_reasons(_skill(tmp_path, body=body)) == []


def _neighbours(root: Path, body_link: str) -> list[str]:
    _skill(root, body=GOOD_BODY + f"The reviewer prompt is in [it]({body_link}).\n")
    write(root / "reviewing" / "SKILL.md", f"---\nname: reviewing\ndescription: {GOOD_DESCRIPTION}\n---\n{GOOD_BODY}")
    write(root / "reviewing" / "prompts" / "reviewer.md", "# Reviewer\n")
    catalog = build_catalog(load_settings([str(root)], {}))
    return [p.detail for p in validate_catalog(catalog, strict=True) if p.skill == "demo"]


def test_a_link_into_a_neighbouring_skill_is_outside_this_skill_not_missing(tmp_path: Path) -> None:
    catalog_details = _neighbours(tmp_path, "../reviewing/prompts/reviewer.md")
    (detail,) = catalog_details
    assert "outside this skill" in detail and "'reviewing'" in detail and "prompts/reviewer.md" in detail
    reasons = [
        p.reason
        for p in validate_catalog(build_catalog(load_settings([str(tmp_path)], {})), strict=True)
        if p.skill == "demo"
    ]
    assert reasons == [ProblemReason.FLOOR_REFERENCE_OUTSIDE_SKILL]


def test_a_link_outside_the_skill_to_nothing_says_nothing_is_there(tmp_path: Path) -> None:
    (detail,) = _neighbours(tmp_path, "../reviewing/prompts/gone.md")
    assert "outside this skill" in detail and "nothing is there" in detail


def test_a_link_that_climbs_out_and_back_in_says_how_to_write_it(tmp_path: Path) -> None:
    # A client cannot follow '..' through the server even when the path comes back in.
    (detail,) = _neighbours(tmp_path, "../demo/SKILL.md")
    assert "back in" in detail and "'SKILL.md'" in detail


def test_a_link_inside_the_skill_with_dot_segments_is_checked_as_the_file_it_names(tmp_path: Path) -> None:
    root = _skill(tmp_path, body=GOOD_BODY + "See [the guide](./references/../references/guide.md).\n")
    assert _floor_reasons(root) == [ProblemReason.FLOOR_MISSING_REFERENCE]
    write(root / "demo" / "references" / "guide.md", "x\n")
    assert _floor_reasons(root) == []


def test_links_and_paths_inside_fenced_code_are_samples_not_references(tmp_path: Path) -> None:
    sample = "```markdown\nSee [the forms guide](FORMS.md) and run `scripts/fill.py`.\n```\n"
    assert _floor_reasons(_skill(tmp_path, body=GOOD_BODY + sample)) == []
    outside = GOOD_BODY + sample + "Then see [the real guide](GUIDE.md).\n"  # positive control
    assert _floor_reasons(_skill(tmp_path, body=outside)) == [ProblemReason.FLOOR_MISSING_REFERENCE]


@pytest.mark.parametrize(
    "body",
    [
        "- **Example**: `scripts/rotate.py` for rotating pages\n",
        "Examples of folders such a skill has: `references/finance.md` and `assets/logo.png`.\n",
        "\nExample: when building a PDF skill, the analysis shows:\n\n1. Rotating is rewritten each time\n"
        "2. A `scripts/rotate.py` script would be helpful\n",
    ],
)
def test_a_path_given_as_an_example_is_not_a_reference(tmp_path: Path, body: str) -> None:
    assert _floor_reasons(_skill(tmp_path, body=GOOD_BODY + body)) == []


@pytest.mark.parametrize(
    "body",
    [
        "Run `scripts/rotate.py` on each page.\n",
        "Pick a template from `examples/letter.md`.\n",  # a folder named examples is not "for example"
        "Prepare the input:\n\n1. Run `scripts/rotate.py`.\n",
        "See [an example of the output](examples/out.md).\n",  # a link is a claim even in an example
    ],
)
def test_a_path_the_body_tells_you_to_use_is_a_reference(tmp_path: Path, body: str) -> None:
    assert _floor_reasons(_skill(tmp_path, body=GOOD_BODY + body)) == [ProblemReason.FLOOR_MISSING_REFERENCE]


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
