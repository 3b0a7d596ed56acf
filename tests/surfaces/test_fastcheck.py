"""The fast accept for tool arguments never accepts what jsonschema refuses.

``fastcheck.compile_accept`` may say "not sure" (False) as often as it likes, since jsonschema
then decides; it must never say True for arguments jsonschema would refuse. Hypothesis draws
argument objects around every tool's real input schema (the right keys with values of every
JSON type, unknown keys, missing keys) and checks exactly that, plus schemas of its own built
from the supported keywords.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from skill_mcp.surfaces import schemas
from skill_mcp.surfaces.fastcheck import compile_accept
from skill_mcp.surfaces.run_tool import INPUT_SCHEMA as RUN_IN
from skill_mcp.surfaces.search_tool import INPUT_SCHEMA as SEARCH_IN

TOOL_SCHEMAS = {
    "skill_list": schemas.SKILL_LIST_IN,
    "skill_load": schemas.SKILL_LOAD_IN,
    "skill_file": schemas.SKILL_FILE_IN,
    "skill_search": SEARCH_IN,
    "skill_run": RUN_IN,
}

# Strings near the length limits in use (255 for a name, 1000 for a query) come from repeats.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-300, 300),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(["a" * 255, "a" * 256, "q" * 1000, "q" * 1001]),
    st.sampled_from([0, 1, 1.0, 200, 201, 0.5, True, False, "", "x"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=10), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=20,
)


def _arguments(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    keys = [*schema.get("properties", {}), "extra", ""]
    values = st.one_of(JSON, st.lists(st.text(max_size=8), max_size=12))
    return st.one_of(st.dictionaries(st.sampled_from(keys), values, max_size=len(keys)), JSON)


_TOOL_VALIDATORS = {name: Draft202012Validator(schema) for name, schema in TOOL_SCHEMAS.items()}


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize("tool", sorted(TOOL_SCHEMAS))
@given(data=st.data())
def test_whatever_the_fast_accept_accepts_jsonschema_accepts(tool: str, data: st.DataObject) -> None:
    schema = TOOL_SCHEMAS[tool]
    accept = compile_accept(schema)
    assert accept is not None  # every input schema we ship takes the fast path
    value = data.draw(_arguments(schema))
    if accept(value):
        assert _TOOL_VALIDATORS[tool].is_valid(value), value


_SUB: st.SearchStrategy[object] = st.deferred(
    lambda: st.one_of(
        st.just(True),
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.one_of(
                    st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null"]),
                    st.lists(st.sampled_from(["string", "integer", "null"]), min_size=1, max_size=3),
                ),
                "minimum": st.integers(-5, 5),
                "maximum": st.one_of(st.integers(-5, 5), st.floats(-5, 5)),
                "minLength": st.integers(0, 3),
                "maxLength": st.integers(0, 3),
                "minItems": st.integers(0, 3),
                "maxItems": st.integers(0, 3),
                "items": _SUB,
                "properties": st.dictionaries(st.sampled_from(["a", "b"]), _SUB, max_size=2),
                "required": st.lists(st.sampled_from(["a", "b"]), unique=True, max_size=2),
                "additionalProperties": st.booleans(),
                "description": st.text(max_size=5),
            },
        ),
    )
)


@given(schema=_SUB, value=JSON)
def test_the_fast_accept_is_sound_for_any_schema_of_the_supported_keywords(schema: Any, value: Any) -> None:
    accept = compile_accept(schema)
    if accept is not None and accept(value):
        assert _valid(schema if isinstance(schema, dict) else {}, value), (schema, value)


def test_typical_arguments_take_the_fast_path_and_bad_ones_do_not() -> None:
    accept = compile_accept(schemas.SKILL_FILE_IN)
    assert accept is not None
    assert accept({"name": "alpha", "paths": ["SKILL.md", "references/guide.md"]})  # positive control
    assert not accept({"name": "alpha"})  # required
    assert not accept({"name": "alpha", "paths": []})  # minItems
    assert not accept({"name": "alpha", "paths": [1]})  # item type
    assert not accept({"name": "alpha", "paths": ["a"], "other": 1})  # additionalProperties
    assert not accept({"name": "", "paths": ["a"]})  # minLength
    limit = compile_accept(schemas.SKILL_LIST_IN)
    assert limit is not None and limit({"limit": 25}) and limit({"limit": 25.0})
    assert not limit({"limit": True}) and not limit({"limit": 201}) and not limit({"limit": 0.5})


def test_an_unknown_keyword_means_no_fast_path() -> None:
    assert compile_accept({"type": "string", "pattern": "^a"}) is None
    assert compile_accept({"type": "object", "properties": {"a": {"enum": ["x"]}}}) is None
    assert compile_accept({"type": "object", "patternProperties": {}}) is None
