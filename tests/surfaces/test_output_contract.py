"""Every tool result satisfies the tool's strict output schema, and clients are shown its shallow form.

``tools/list`` advertises ``schemas.advertised(spec.output_schema)``: top-level fields typed,
arrays of objects described in prose (the SDK client validates every result, and typed item
schemas cost more than the call itself), with the strict schema in the tool's ``_meta``. The
strict schema is the contract: these tests drive a real in-process server through the SDK's
own client over a tree that makes every optional field appear, and check each
``structuredContent`` against the strict schema with a full validator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.runner.core import Runner
from skill_mcp.runner.harden import HardenReport
from skill_mcp.server import build_server
from skill_mcp.surfaces import schemas
from skill_mcp.surfaces.read_tools import read_tools
from skill_mcp.surfaces.registry import ToolSpec
from skill_mcp.surfaces.run_tool import run_tool_spec
from skill_mcp.surfaces.search_tool import search_tool_spec
from tests.integration.harness import build_tree

pytestmark = pytest.mark.anyio

RUBY_MD = """---
name: ruby-tool
description: Declares a script whose interpreter this deployment lacks.
mcp-host:
  version: 1
  run:
    - script: gem.rb
      interpreter: ruby
---
Body.
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = build_tree(tmp_path_factory.mktemp("contract") / "skills")
    (tree / "ruby-tool").mkdir()
    (tree / "ruby-tool" / "SKILL.md").write_text(RUBY_MD, encoding="utf-8")
    (tree / "ruby-tool" / "gem.rb").write_text("puts 1\n", encoding="utf-8")
    return tree


def _server(root: Path) -> tuple[Any, list[ToolSpec]]:
    """The real server with every tool, built without hardening this test process."""
    settings = load_settings([str(root)], {"MCP_CONFIRM_ELICITATION": "off"})
    catalog = build_catalog(settings)
    runner = Runner.create(settings, harden=HardenReport(True, True), audit=lambda record: None)
    extra = [run_tool_spec(runner), search_tool_spec()]
    server = build_server(settings, lambda: catalog, tools=extra, script_states=runner.states(lambda: catalog))
    return server, [*read_tools(), *extra]


def _strict(root: Path) -> dict[str, Mapping[str, Any]]:
    return {s.name: s.output_schema for s in _server(root)[1] if s.output_schema is not None}


@pytest.fixture(scope="module")
async def client(root: Path) -> AsyncIterator[Client]:
    async with Client(_server(root)[0], mode="legacy") as c:
        yield c


def _holds(strict: Mapping[str, Any], value: Any) -> None:
    errors = sorted(Draft202012Validator(dict(strict)).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, [f"/{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]


async def _structured(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert result.structured_content is not None, result.content
    return dict(result.structured_content)


async def test_every_tool_result_satisfies_its_strict_schema(client: Client, root: Path) -> None:
    strict = _strict(root)
    first = await _structured(client, "skill_list", {"limit": 2})
    later = await _structured(client, "skill_list", {"cursor": first["nextCursor"], "limit": 50})
    by_name = {e["name"]: e for e in first["skills"] + later["skills"]}
    # The tree makes the optional fields appear, so the check is not vacuous.
    assert first["problems"] and "problems" not in later
    assert by_name["ruby-tool"]["unavailableScripts"] and by_name["gamma"]["skillsListExcluded"]
    assert by_name["alpha"]["scripts"]
    results = {
        "skill_list": [first, later],
        "skill_load": [await _structured(client, "skill_load", {"name": "alpha"})],
        "skill_file": [
            await _structured(
                client,
                "skill_file",
                {
                    "name": "alpha",
                    "paths": ["references/guide.md", "assets/logo.png", "../beta/SKILL.md", "references/big.txt"],
                },
            )
        ],
        "skill_search": [await _structured(client, "skill_search", {"query": "reports from notes"})],
        "skill_run": [await _structured(client, "skill_run", {"skill": "alpha", "script": "scripts/hello.py"})],
    }
    assert {e.get("encoding") for e in results["skill_file"][0]["files"]} >= {"utf-8", "base64", None}
    assert results["skill_search"][0]["hits"]
    assert results["skill_run"][0]["status"] == "confirmation-required"
    for tool, outputs in results.items():
        for out in outputs:
            _holds(strict[tool], out)


async def test_a_result_that_breaks_the_strict_schema_is_caught(client: Client, root: Path) -> None:
    # Positive control for the check above: a wrong type inside an item is an error to the
    # strict schema, though the advertised one (item fields unchecked) lets it through.
    strict = _strict(root)["skill_list"]
    page = await _structured(client, "skill_list", {})
    page["skills"][0]["fileCount"] = "six"
    with pytest.raises(AssertionError):
        _holds(strict, page)
    assert not list(Draft202012Validator(schemas.advertised(dict(strict))).iter_errors(page))


async def test_tools_list_advertises_the_shallow_form_and_carries_the_strict_schema(client: Client, root: Path) -> None:
    strict = _strict(root)
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(strict) <= set(listed)
    for name, schema in strict.items():
        tool = listed[name]
        assert tool.output_schema == schemas.advertised_output(dict(schema))
        assert tool.meta is not None and tool.meta[schemas.STRICT_SCHEMA_META] == schema
        assert tool.output_schema is not None
        Draft202012Validator.check_schema(tool.output_schema)
        # Every top-level field is still there; only arrays of objects lose their item schema.
        assert set(tool.output_schema["properties"]) == set(schema["properties"])


REFUSED_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("skill_list", {"cursor": "not-a-cursor"}),
    ("skill_load", {"name": "nope"}),
    ("skill_load", {"name": "alpha", "extra": 1}),
    ("skill_file", {"name": "nope", "paths": ["SKILL.md"]}),
    ("skill_file", {"name": "alpha", "paths": ["SKILL.md"] * 9}),
    ("skill_file", {"name": "bulk", "paths": [f"data/part{i}.txt" for i in range(5)]}),
    ("skill_run", {"skill": "alpha", "script": "scripts/other.py"}),
    ("skill_run", {"skill": "ruby-tool", "script": "gem.rb"}),
    ("skill_run", {"skill": "alpha", "script": "scripts/hello.py", "confirmToken": "not-a-token"}),
    ("skill_search", {"query": ""}),
]


async def test_every_refusal_satisfies_the_advertised_output_schema(client: Client, root: Path) -> None:
    # The TypeScript SDK's client (the MCP Inspector's) checks structuredContent against
    # outputSchema on error results too; a refusal the advertised schema refused reached its
    # user as a -32602 instead of the tool error with a reason.
    listed = {t.name: t.output_schema for t in (await client.list_tools()).tools}
    strict = _strict(root)
    reasons = set()
    for tool, args in REFUSED_CALLS:
        result = await client.call_tool(tool, args)
        refusal = dict(result.structured_content or {})
        assert result.is_error and refusal.get("reason"), (tool, args, result.content)
        reasons.add(refusal["reason"])
        advertised = listed[tool]
        assert advertised is not None, tool
        _holds(advertised, refusal)
        _holds(schemas.REFUSAL, refusal)
        # Positive control: the success shape alone (what was advertised before) refuses it.
        assert list(Draft202012Validator(schemas.advertised(dict(strict[tool]))).iter_errors(refusal)), tool
    assert len(reasons) >= 7, reasons


def test_the_advertised_output_schema_still_requires_the_success_fields_of_a_success() -> None:
    shown = schemas.advertised_output(schemas.SKILL_LIST_OUT)
    assert "required" not in shown and shown["anyOf"][0] == {"required": schemas.SKILL_LIST_OUT["required"]}
    errors = list(Draft202012Validator(shown).iter_errors({"skills": [], "total": 0}))
    assert errors  # neither a whole page nor a refusal
    assert not list(Draft202012Validator(shown).iter_errors({"reason": "unknown-skill", "detail": "no such skill"}))


def test_advertised_arrays_of_objects_describe_every_item_field() -> None:
    shown = schemas.advertised(schemas.SKILL_LIST_OUT)
    skills = shown["properties"]["skills"]
    strict_item = schemas.SKILL_LIST_OUT["properties"]["skills"]["items"]
    assert skills["type"] == "array" and "items" not in skills
    for field in strict_item["properties"]:
        assert field in skills["description"]
    assert "fileCount: integer >= 0" in skills["description"] and "scripts: array of objects" in skills["description"]
    assert "skillsListExcluded?: string" in skills["description"]  # optional fields are marked
    assert schemas.STRICT_SCHEMA_META in skills["description"]
    # Plain fields and arrays of plain values are left as they are.
    assert shown["properties"]["total"] == schemas.SKILL_LIST_OUT["properties"]["total"]
    plain = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}
    assert schemas.advertised(plain) == plain
