"""What the Skills extension publishes from a tree full of traps, and what ``validate`` says.

Every trap (tests/verifiers/traps.py) is served by the tools and left out of the extension with
a stable ``extension-excluded`` problem naming its rule; the ordinary and nested skills are
published, a nested one under its enclosing skill's path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.surfaces.paging import decode_cursor
from skill_mcp.surfaces.prompts import list_prompts
from tests.cli.helpers import as_json, run
from tests.helpers import text_of
from tests.integration.harness import connect, directory_read, skills_get, skills_list
from tests.verifiers.traps import AMBIGUOUS_FIELDS, LONG_DESCRIPTION, PUBLISHED_URIS, REFUSED, SERVED, build_traps

pytestmark = pytest.mark.slow  # slow: a server subprocess per case

INVALID_PARAMS = -32602


@pytest.fixture(scope="module")
def traps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_traps(tmp_path_factory.mktemp("traps") / "skills")


def test_validate_strict_names_every_excluded_skill_with_its_rule(traps: Path) -> None:
    done = run("validate", "--strict", "--json", str(traps))
    report = as_json(done)
    excluded = {(p["skill"], p["rule"]) for p in report["problems"] if p["reason"] == "extension-excluded"}
    assert excluded == {(name, str(rule)) for name, rule in SERVED.items() if rule is not None}
    assert all(p["level"] == "error" for p in report["problems"] if p["reason"] == "extension-excluded")
    refused = {(Path(p["path"]).name, p["reason"]) for p in report["problems"] if p["level"] == "error"}
    assert set(REFUSED.items()) <= refused
    assert done.returncode == 1
    # The published skills carry no extension problem.
    assert not {p["skill"] for p in report["problems"] if p.get("rule")} & {n for n, r in SERVED.items() if r is None}


def test_validate_fails_on_a_skill_only_the_extension_refuses(tmp_path: Path) -> None:
    (tmp_path / "wordy").mkdir()
    (tmp_path / "wordy" / "SKILL.md").write_text(
        f"---\nname: wordy\ndescription: {LONG_DESCRIPTION}\n---\n1. Step.\n", encoding="utf-8"
    )
    done = run("validate", "--json", str(tmp_path))
    report = as_json(done)
    (problem,) = [p for p in report["problems"] if p["reason"] == "extension-excluded"]
    assert (problem["rule"], problem["level"], problem["skill"]) == ("description-too-long", "error", "wordy")
    assert done.returncode == 1 and report["skills"] == 1  # still served by the tools


def test_validate_warns_for_each_value_yaml_1_1_reads_otherwise_and_says_how_to_quote_it(traps: Path) -> None:
    report = as_json(run("validate", "--json", str(traps)))
    warned = [p for p in report["problems"] if p["reason"] == "yaml-version-ambiguous"]
    assert {p["detail"].split()[2].rstrip(":") for p in warned} == AMBIGUOUS_FIELDS
    assert all(p["level"] == "warning" and p["skill"] == "yaml-ambiguous" for p in warned)
    enabled = next(p["detail"] for p in warned if "metadata.enabled" in p["detail"])
    assert "'yes'" in enabled and "True" in enabled and 'quote it (enabled: "yes")' in enabled


def test_the_published_frontmatter_stays_the_yaml_1_2_reading(traps: Path) -> None:
    catalog = build_catalog(load_settings([str(traps)], {}))
    assert catalog.skills["yaml-ambiguous"].frontmatter["metadata"] == {
        "enabled": "yes",
        "released": "2024-01-02",
        "duration": "1:30",
        "count": "1_000",
    }


def test_a_skill_left_out_of_the_extension_is_still_served_by_the_tools(traps: Path) -> None:
    catalog = build_catalog(load_settings([str(traps)], {}))
    assert set(catalog.skills) == set(SERVED)
    listed = {s.name for s in catalog.extension_listed}
    assert listed == {n for n, r in SERVED.items() if r is None}
    for name, rule in SERVED.items():
        assert catalog.skills[name].skills_list_excluded == rule, name


def test_a_nested_skill_is_published_under_the_enclosing_skills_path(traps: Path) -> None:
    catalog = build_catalog(load_settings([str(traps)], {}))
    child, parent = catalog.skills["child"], catalog.skills["parent"]
    assert child.skill_path == "parent/child" and child.uri_prefix == "skill://parent/child/"
    # The enclosing skill's manifest lists the nested files too, under the same URIs.
    assert {"child/SKILL.md", "child/references/guide.md"} <= {f.rel for f in parent.files}
    assert catalog.skill_at("parent/child/references/guide.md") == (child, "references/guide.md")
    assert catalog.skill_at("parent/child") == (child, None)
    assert catalog.skill_at("parent/SKILL.md") == (parent, "SKILL.md")


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_skills_list_publishes_exactly_the_conforming_entries(traps: Path, era: str) -> None:
    async with connect(traps, era) as client:
        uris: list[str] = []
        cursor = None
        while True:
            page = await skills_list(client, cursor)
            uris += [e["uri"] for e in page["skills"]]
            for entry in page["skills"]:
                assert entry["uri"].rsplit("/", 2)[-2] == entry["frontmatter"]["name"]
                assert len(entry["resources"]) <= 512
            cursor = page.get("nextCursor")
            if not cursor:
                break
        assert set(uris) == PUBLISHED_URIS
        listed: list[str] = []
        cursor = None
        while True:
            res = await client.list_resources(cursor=cursor)
            listed += [r.uri for r in res.resources]
            cursor = res.next_cursor
            if not cursor:
                break
        # resources/list holds the published skills' files only: no URI that breaks the naming rule.
        assert {u.split("/")[2] for u in listed} == {"plain-notes", "report-writer", "parent"}
        assert "skill://parent/child/references/guide.md" in listed


@pytest.mark.anyio
async def test_resource_names_are_unambiguous_in_a_picker(traps: Path) -> None:
    async with connect(traps, "2026-07-28") as client:
        names: dict[str, str] = {}
        cursor = None
        while True:
            res = await client.list_resources(cursor=cursor)
            names.update({r.uri: r.name for r in res.resources})
            cursor = res.next_cursor
            if not cursor:
                break
    assert len(set(names.values())) == len(names), "two resources share a name"
    assert names["skill://plain-notes/LICENSE.txt"] == "plain-notes/LICENSE.txt"
    assert names["skill://report-writer/LICENSE.txt"] == "report-writer/LICENSE.txt"
    assert names["skill://report-writer/SKILL.md"] == "report-writer"  # the frontmatter name, as SEP-2640 says


def test_two_nested_skills_sharing_a_name_are_both_refused_never_chosen_by_scan_order(tmp_path: Path) -> None:
    for parent in ("billing", "support"):
        for where, name in ((tmp_path / parent, parent), (tmp_path / parent / "refunds", "refunds")):
            where.mkdir(parents=True, exist_ok=True)
            (where / "SKILL.md").write_text(
                f"---\nname: {name}\ndescription: Use when testing.\n---\n1. Do.\n", encoding="utf-8"
            )
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    # A grant names a skill; two directories answering to one name would let a bundle claim the
    # grants written for its neighbour. So neither is served, by the tools or the extension.
    assert sorted(catalog.skills) == ["billing", "support"]
    assert {s.skill_path for s in catalog.extension_listed} == {"billing", "support"}
    refused = sorted(p.path for p in catalog.problems if p.reason == "duplicate-name")
    assert refused == [str(tmp_path / "billing" / "refunds"), str(tmp_path / "support" / "refunds")]


@pytest.mark.anyio
async def test_a_nested_skill_answers_get_read_and_directory_read_by_its_own_path(traps: Path) -> None:
    async with connect(traps, "2026-07-28") as client:
        got = (await skills_get(client, "skill://parent/child/SKILL.md"))["skill"]
        assert got["frontmatter"]["name"] == "child"
        assert {r["uri"] for r in got["resources"]} == {
            "skill://parent/child/SKILL.md",
            "skill://parent/child/references/guide.md",
        }
        # The body's relative reference resolves against the nested skill's own directory.
        guide = (await client.read_resource("skill://parent/child/references/guide.md")).contents[0]
        assert text_of(guide) == "# Child guide\n"
        kids = {r["uri"] for r in (await directory_read(client, "skill://parent/child"))["resources"]}
        assert kids == {"skill://parent/child/SKILL.md", "skill://parent/child/references"}
        # The tools keep naming it by its name.
        loaded = await client.call_tool("skill_load", {"name": "child"})
        assert not loaded.is_error
        assert loaded.structured_content["uri"] == "skill://parent/child/SKILL.md"
        for uri in ("skill://child/SKILL.md", "skill://parent/child"):
            with pytest.raises(MCPError) as err:
                await skills_get(client, uri)
            assert err.value.code == INVALID_PARAMS, uri


@pytest.mark.anyio
async def test_skills_get_of_an_excluded_skill_is_32602_naming_the_rule(traps: Path) -> None:
    async with connect(traps, "2026-07-28") as client:
        with pytest.raises(MCPError) as err:
            await skills_get(client, "skill://many-files/SKILL.md")
        assert err.value.code == INVALID_PARAMS
        assert json.dumps(err.value.error.data).count("too-many-files") == 1
        # The tools still serve it (capped), and say why it is not in the extension.
        listing = await client.call_tool("skill_list", {"limit": 200})
        by_name = {s["name"]: s for s in listing.structured_content["skills"]}
        assert by_name["many-files"]["skillsListExcluded"] == "too-many-files"


def test_prompts_list_pages_stay_small_at_the_longest_descriptions(tmp_path: Path) -> None:
    for i in range(230):
        (tmp_path / f"s{i:03}").mkdir()
        (tmp_path / f"s{i:03}" / "SKILL.md").write_text(
            f"---\nname: s{i:03}\ndescription: {'x' * 1024}\n---\nBody.\n", encoding="utf-8"
        )
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        result = list_prompts(catalog, cursor)
        pages += 1
        size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))
        assert size < 64 * 1024, size
        names += [p.name for p in result.prompts]
        cursor = result.next_cursor
        if cursor is None:
            break
        assert decode_cursor("prompts", cursor) == len(names)
    assert names == sorted(catalog.skills) and pages > 1
