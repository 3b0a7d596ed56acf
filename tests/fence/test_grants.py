"""MCP_SKILL_RUN: syntax, intersection with the declaration, hosted and standalone defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.models import ScriptDecl
from skill_mcp.reasons import ProblemReason
from skill_mcp.runner.grants import build_grants, forbidden_variable

from .helpers import catalog_of, make_skill


@pytest.fixture()
def catalog(root: Path):
    weather = make_skill(
        root,
        "weather",
        {"scripts/f.js": "1"},
        [ScriptDecl("scripts/f.js", "node", env=("WEATHER_KEY", "LD_PRELOAD"))],
        egress=["api.weather.example"],
    )
    other = make_skill(root, "other", {"x.py": "1"}, [ScriptDecl("x.py", "python", env=("OTHER_KEY",))])
    return catalog_of(weather, other)


def granted(gs: Any, skill: str, script: str) -> Any:
    """The grant for one script; the test fails here when there is none."""
    found = gs.get(skill, script)
    assert found is not None, f"no grant for {skill} {script}"
    return found


def reasons(gs):
    return [p.reason for p in gs.problems]


def test_standalone_without_grants_lets_the_declaration_stand(catalog) -> None:
    gs = build_grants(catalog, None, hosted=False)
    assert gs.grant_from == "declaration" and gs.note is None
    assert granted(gs, "weather", "scripts/f.js").env == ("WEATHER_KEY",)  # the loader variable is never handed
    assert granted(gs, "weather", "scripts/f.js").egress == ("api.weather.example",)
    assert gs.get("other", "x.py") is not None


def test_hosted_without_grants_grants_nothing_and_says_so(catalog) -> None:
    gs = build_grants(catalog, None, hosted=True)
    assert gs.grant_from == "hosted-default" and gs.note
    assert gs.get("weather", "scripts/f.js") is None and not gs.grants


def test_a_row_grants_only_what_the_script_declared(catalog) -> None:
    raw = json.dumps(
        [
            {
                "skill": "weather",
                "script": "scripts/f.js",
                "env": ["WEATHER_KEY", "OTHER_KEY"],
                "egress": ["api.weather.example", "evil.example"],
            }
        ]
    )
    gs = build_grants(catalog, raw, hosted=True)
    grant = granted(gs, "weather", "scripts/f.js")
    assert grant.env == ("WEATHER_KEY",) and grant.egress == ("api.weather.example",)
    assert reasons(gs) == [ProblemReason.GRANT_UNMATCHED, ProblemReason.GRANT_UNMATCHED]
    assert gs.get("other", "x.py") is None  # no row: not granted even though declared


def test_a_row_for_an_undeclared_script_grants_nothing(catalog) -> None:
    raw = json.dumps([{"skill": "weather", "script": "scripts/evil.js"}, {"skill": "nope", "script": "a.js"}])
    gs = build_grants(catalog, raw, hosted=False)
    assert not gs.grants
    assert reasons(gs) == [ProblemReason.GRANT_UNMATCHED, ProblemReason.GRANT_UNMATCHED]


def test_a_declared_loader_variable_can_never_be_granted(catalog) -> None:
    raw = json.dumps([{"skill": "weather", "script": "scripts/f.js", "env": ["LD_PRELOAD"]}])
    gs = build_grants(catalog, raw, hosted=False)
    assert granted(gs, "weather", "scripts/f.js").env == ()
    assert reasons(gs) == [ProblemReason.ENV_FORBIDDEN]


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "{}",
        '"x"',
        "[1]",
        '[{"skill": "weather"}]',
        '[{"skill": "weather", "script": "scripts/f.js", "env": "WEATHER_KEY"}]',
        '[{"skill": "weather", "script": "scripts/f.js", "bogus": 1}]',
    ],
)
def test_a_malformed_value_grants_nothing_and_is_reported(catalog, raw: str) -> None:
    gs = build_grants(catalog, raw, hosted=False)
    assert gs.grant_from == "MCP_SKILL_RUN"
    assert not gs.grants
    assert ProblemReason.GRANT_INVALID in reasons(gs)


def test_several_rows_for_one_script_are_a_union(catalog) -> None:
    raw = json.dumps([{"skill": "other", "script": "x.py"}, {"skill": "other", "script": "x.py", "env": ["OTHER_KEY"]}])
    assert granted(build_grants(catalog, raw, hosted=False), "other", "x.py").env == ("OTHER_KEY",)


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "NODE_OPTIONS",
        "BASH_ENV",
        "ENV",
        "BASH_FUNC_x%%",
        "PATH",
        "TMPDIR",
        "SKILL_OUTPUT_DIR",
        "HOME",
        "MCP_DATA_DIR",
        "GCONV_PATH",
        "LC_ALL",
        "PERL5OPT",
        "9X",
        "A=B",
        "",
    ],
)
def test_loader_and_fixed_variables_are_forbidden(name: str) -> None:
    assert forbidden_variable(name) is not None


@pytest.mark.parametrize("name", ["WEATHER_API_KEY", "GITHUB_TOKEN", "_X"])
def test_ordinary_variables_may_be_granted(name: str) -> None:  # positive control
    assert forbidden_variable(name) is None


def test_the_runner_keeps_grants_per_catalog_and_rebuilds_them_for_a_new_one(root: Path) -> None:
    from .helpers import make_runner

    runner = make_runner()
    first = catalog_of(make_skill(root, "a", {"a.py": "1"}, [ScriptDecl("a.py", "python")]))
    assert runner.grants(first) is runner.grants(first)  # built once for one catalog
    reloaded = catalog_of(*first.skills.values(), make_skill(root, "b", {"b.py": "1"}, [ScriptDecl("b.py", "python")]))
    assert runner.grants(first).get("b", "b.py") is None
    assert runner.grants(reloaded).get("b", "b.py") is not None  # a reload (a new catalog) is seen


def test_a_nested_skill_is_granted_by_its_name_never_by_its_path(tmp_path: Path) -> None:
    from skill_mcp.catalog import build_catalog
    from skill_mcp.config import load_settings

    decl = "mcp-host:\n  version: 1\n  run:\n    - script: scripts/run.py\n      interpreter: python\n"
    for where, name in ((tmp_path / "parent", "parent"), (tmp_path / "parent" / "child", "child")):
        (where / "scripts").mkdir(parents=True)
        (where / "scripts" / "run.py").write_text("print(1)\n", encoding="utf-8")
        (where / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Use when testing.\n{decl}---\n1. Run.\n", encoding="utf-8"
        )
    catalog = build_catalog(load_settings([str(tmp_path)], {}))
    assert catalog.skills["child"].uri_prefix == "skill://parent/child/"  # published by path
    gs = build_grants(catalog, json.dumps([{"skill": "child", "script": "scripts/run.py"}]), hosted=True)
    assert gs.get("child", "scripts/run.py") is not None
    assert gs.get("parent", "scripts/run.py") is None  # the enclosing skill gains nothing from it
    by_path = build_grants(catalog, json.dumps([{"skill": "parent/child", "script": "scripts/run.py"}]), hosted=True)
    assert not by_path.grants and reasons(by_path) == [ProblemReason.GRANT_UNMATCHED]
