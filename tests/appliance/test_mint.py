"""mint.yaml follows the project's schema, proposes nothing a registration decides, and
comments every key. Runs without Docker."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _load() -> tuple[dict[str, Any], dict[str, Any]]:
    manifest = yaml.safe_load((REPO / "mint.yaml").read_text(encoding="utf-8"))
    schema = json.loads((REPO / "schemas" / "mint.schema.json").read_text(encoding="utf-8"))
    return manifest, schema


def test_mint_yaml_validates_against_its_schema() -> None:
    manifest, schema = _load()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(manifest)
    assert manifest["egress"]["allow"] == []


@pytest.mark.parametrize(
    "change",
    [
        {"runtime": "fly-machine"},
        {"skills": [{"github-archive": "owner/repo@0123abc"}]},
        {"state": {"dataDir": True}},
        {"egress": {"allow": ["api.example.com"]}},
    ],
)
def test_schema_refuses_what_only_a_registration_decides(change: dict[str, Any]) -> None:
    manifest, schema = _load()
    bad = copy.deepcopy(manifest)
    bad.update(change)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)


def test_every_key_in_mint_yaml_is_commented() -> None:
    lines = (REPO / "mint.yaml").read_text(encoding="utf-8").splitlines()
    uncommented = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or ":" not in stripped:
            continue
        if stripped.startswith("- ") and not stripped.startswith("- name:"):
            continue
        if stripped.startswith(("secret:",)):
            continue  # described with its list item's comment
        above = lines[i - 1].strip() if i else ""
        if not above.startswith("#"):
            uncommented.append(stripped)
    assert uncommented == []
    assert len([ln for ln in lines if ln.strip().startswith("#")]) > 10  # positive control
