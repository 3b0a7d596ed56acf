"""Every tool's input schema is a valid JSON Schema 2020-12 document.

``ToolTable`` compiles validators on first call (jsonschema stays off the start-up path), so
the check it used to make at construction is made here, for every tool the server registers.
"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from jsonschema import Draft202012Validator

from skill_mcp.config import load_settings
from skill_mcp.runner.core import Runner
from skill_mcp.surfaces.read_tools import read_tools
from skill_mcp.surfaces.run_tool import run_tool_spec
from skill_mcp.surfaces.search_tool import search_tool_spec


def _specs(tmp_path: Path) -> list:
    runner = Runner.create(load_settings([str(tmp_path)], {}), harden=None)
    return [*read_tools(), search_tool_spec(), run_tool_spec(runner)]


def test_every_input_and_output_schema_is_valid(tmp_path: Path) -> None:
    specs = _specs(tmp_path)
    assert {s.name for s in specs} >= {"skill_list", "skill_load", "skill_file", "skill_search", "skill_run"}
    for spec in specs:
        Draft202012Validator.check_schema(spec.input_schema)
        if spec.output_schema is not None:
            Draft202012Validator.check_schema(spec.output_schema)


def test_an_invalid_schema_is_caught_by_the_check() -> None:
    with pytest.raises(jsonschema.SchemaError):  # positive control for the check above
        Draft202012Validator.check_schema({"type": "objekt"})


def test_skill_search_advertises_the_search_packages_own_limit() -> None:
    # search_tool repeats the constant so that listing the tool does not import the index code.
    from skill_mcp import search
    from skill_mcp.surfaces import search_tool

    assert search_tool.MAX_LIMIT == search.MAX_LIMIT
    assert search_tool.INPUT_SCHEMA["properties"]["limit"]["maximum"] == search.MAX_LIMIT
