"""What skill_list says about scripts: states, grant source, problems (pure, from records)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp.models import ScriptDecl
from skill_mcp.reasons import Level, ProblemReason
from skill_mcp.runner.harden import HardenReport
from skill_mcp.runner.interpreters import resolve_interpreters

from .helpers import catalog_of, make_runner, make_skill


def _catalog(root: Path):
    skill = make_skill(
        root,
        "s",
        {"a.py": "1", "b.js": "1"},
        [
            ScriptDecl("a.py", "python", env=("KEY", "LD_PRELOAD"), description="does a"),
            ScriptDecl("b.js", "node"),
            ScriptDecl("c.sh", "bash"),
        ],
    )
    skill = replace(skill, missing_scripts=("c.sh",))
    plain = make_skill(root, "plain", {})
    return catalog_of(skill, plain)


def states(runner, catalog) -> dict[str, str]:
    view = runner.states(lambda: catalog)
    return {s["script"]: s["state"] for s in view.scripts(catalog.skills["s"])}


def test_standalone_states_and_grant_source(root: Path) -> None:
    catalog = _catalog(root)
    runner = make_runner(interpreters=resolve_interpreters(only=("python", "bash")))
    view = runner.states(lambda: catalog)
    assert states(runner, catalog) == {"a.py": "runnable", "b.js": "interpreter-unavailable", "c.sh": "missing"}
    assert view.grant()["grantFrom"] == "declaration" and "grantNote" not in view.grant()
    extras = view.skill_extras(catalog.skills["s"])
    assert extras["unavailableScripts"][0]["script"] == "b.js" and "python" in extras["unavailableScripts"][0]["detail"]
    with pytest.raises(SkillMcpError) as info:  # skill_run refuses it in the same words
        runner.prepare(catalog, "s", "b.js", [])
    assert info.value.detail == extras["unavailableScripts"][0]["detail"]
    assert view.scripts(catalog.skills["plain"]) == []
    first = view.scripts(catalog.skills["s"])[0]
    assert first["env"] == ["KEY"] and first["description"] == "does a"
    # node is in the closed set but not in this deployment: its script is refused here, so it is
    # an error-level problem beside unavailableScripts, in the words skill_run refuses it with.
    unavailable, forbidden = view.problems()
    assert (unavailable.reason, unavailable.level, unavailable.skill) == (
        ProblemReason.INTERPRETER_UNAVAILABLE,
        Level.ERROR,
        "s",
    )
    assert unavailable.path.endswith("/b.js") and info.value.detail in unavailable.detail
    assert forbidden.reason == ProblemReason.ENV_FORBIDDEN


def test_hosted_without_grants_lists_declared_scripts_as_not_granted(root: Path) -> None:
    catalog = _catalog(root)
    runner = make_runner({"MCP_HOST_METER_FILE": "/x"})
    view = runner.states(lambda: catalog)
    assert states(runner, catalog)["a.py"] == "not-granted"
    assert view.grant()["grantFrom"] == "hosted-default" and view.grant()["grantNote"]
    assert view.skill_extras(catalog.skills["s"])["ungrantedScripts"] == ["a.py", "b.js"]


def test_grant_rows_that_match_nothing_are_reported(root: Path) -> None:
    catalog = _catalog(root)
    grant = json.dumps([{"skill": "s", "script": "a.py", "env": ["KEY", "NOPE"]}, {"skill": "ghost", "script": "x"}])
    runner = make_runner({"MCP_SKILL_RUN": grant})
    view = runner.states(lambda: catalog)
    assert states(runner, catalog)["a.py"] == "runnable" and states(runner, catalog)["b.js"] == "not-granted"
    reasons = [p.reason for p in view.problems()]
    assert reasons.count(ProblemReason.GRANT_UNMATCHED) == 2 and view.grant()["grantFrom"] == "MCP_SKILL_RUN"


def test_hosted_and_unscrubbed_blocks_every_script_and_reports_it(root: Path) -> None:
    catalog = _catalog(root)
    grant = json.dumps([{"skill": "s", "script": "a.py"}])
    runner = make_runner({"MCP_DATA_DIR": "/tmp", "MCP_SKILL_RUN": grant}, harden=HardenReport(False, True, "x"))
    view = runner.states(lambda: catalog)
    entry = view.scripts(catalog.skills["s"])[0]
    assert entry["state"] == "blocked" and entry["reason"] == "environ-unscrubbed"
    assert ProblemReason.ENVIRON_UNSCRUBBED in [p.reason for p in view.problems()]


def test_a_scrubbed_server_reports_no_environ_problem(root: Path) -> None:  # positive control
    catalog = _catalog(root)
    view = make_runner().states(lambda: catalog)
    assert ProblemReason.ENVIRON_UNSCRUBBED not in [p.reason for p in view.problems()]


def test_the_view_follows_a_catalog_swap(root: Path) -> None:
    first = _catalog(root)
    second = catalog_of(make_skill(root, "other", {"z.py": "1"}, [ScriptDecl("z.py", "python")]))
    current = [first]
    view = make_runner().states(lambda: current[0])
    assert view.scripts(first.skills["s"])
    current[0] = second
    assert view.scripts(first.skills["s"]) == []  # the old skill is gone from the new catalog
    assert view.scripts(second.skills["other"])[0]["state"] == "runnable"
