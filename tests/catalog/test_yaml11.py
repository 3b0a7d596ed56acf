"""Where YAML 1.1 (PyYAML's safe_load) reads a frontmatter otherwise than YAML 1.2 (ours)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.catalog import yaml12
from skill_mcp.catalog.yaml11 import differences

BASE = "name: x\ndescription: d\n"


@pytest.mark.parametrize(
    ("extra", "field", "yaml12_value", "yaml11_value"),
    [
        ("license: yes\n", "license", "yes", True),
        ("license: on\n", "license", "on", True),
        ("license: No\n", "license", "No", False),
        ("license: OFF\n", "license", "OFF", False),
        ("metadata:\n  when: 2024-01-02\n", "metadata.when", "2024-01-02", "date"),
        ("metadata:\n  t: 1:30\n", "metadata.t", "1:30", 90),
        ("metadata:\n  n: 1_000\n", "metadata.n", "1_000", 1000),
        ("metadata:\n  o: 0o17\n", "metadata.o", 15, "0o17"),
        ("metadata:\n  z: 017\n", "metadata.z", 17, 15),
        ("metadata:\n  e: 1e3\n", "metadata.e", 1000.0, "1e3"),
        ("metadata:\n  list: [a, yes]\n", "metadata.list[1]", "yes", True),
    ],
)
def test_a_value_read_two_ways_is_named_with_both_readings(
    extra: str, field: str, yaml12_value: object, yaml11_value: object
) -> None:
    text = BASE + extra
    (diff,) = differences(text, yaml12.load(text))
    assert diff.field == field and diff.yaml12 == yaml12_value
    assert type(diff.yaml11).__name__ == "date" if yaml11_value == "date" else diff.yaml11 == yaml11_value


def test_a_key_read_two_ways_is_named_and_quoting_the_key_is_the_advice() -> None:
    text = BASE + "metadata:\n  on: x\n"
    (diff,) = differences(text, yaml12.load(text))
    assert (diff.field, diff.key, diff.yaml11) == ("metadata.on", True, True)
    assert diff.advice() == 'quote the key ("on":) so every host reads the text'


@pytest.mark.parametrize(
    "extra",
    [
        "license: MIT\n",
        'metadata:\n  version: "1.0"\n  flag: "yes"\n',
        "metadata:\n  hex: 0x1F\n  n: 12\n  f: 1.5\n  t: true\n  none: ~\n",
        "description2: >-\n  folded yes\n  text\n",
    ],
)
def test_values_both_versions_read_alike_are_not_reported(extra: str) -> None:
    text = BASE + extra
    assert differences(text, yaml12.load(text)) == []


@given(
    st.dictionaries(
        st.from_regex(r"k-[a-z0-9-]{0,8}", fullmatch=True),
        st.text(st.characters(whitelist_categories=("L", "N", "P", "S", "Zs")), max_size=20),
        max_size=5,
    )
)
def test_json_quoted_strings_read_alike_in_both_versions(metadata: dict[str, str]) -> None:
    # The advice for a string is to write it double-quoted (json.dumps): that always agrees.
    text = (
        BASE + "metadata:\n" + "".join(f"  {k}: {json.dumps(v, ensure_ascii=False)}\n" for k, v in metadata.items())
        if metadata
        else BASE
    )
    assert differences(text, yaml12.load(text)) == []
