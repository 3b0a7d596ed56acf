"""Which code runs: declared scripts only, inside the skill, closed interpreter set, bounded argv."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import MAX_ARG_CHARS, MAX_ARGS
from skill_mcp.models import Catalog, ScriptDecl
from skill_mcp.reasons import Refusal
from skill_mcp.runner.interpreters import Interpreters, resolve_interpreters

from .helpers import catalog_of, make_runner, make_skill

SECRET = "s3cr3t-value-never-shown"


@pytest.fixture()
def catalog(root: Path) -> Catalog:
    demo = make_skill(
        root,
        "demo",
        {"scripts/ok.py": "print('ok')\n", "scripts/undeclared.py": "1\n", "notes.txt": "x"},
        [
            ScriptDecl("scripts/ok.py", "python", env=("DEMO_KEY", "ABSENT_KEY"), timeout=9999),
            ScriptDecl("scripts/ok.js", "node"),
            ScriptDecl("scripts/ok.sh", "cobol"),
        ],
    )
    return catalog_of(demo)


def refusal(fn, *args, **kwargs) -> Refusal:
    with pytest.raises(SkillMcpError) as info:
        fn(*args, **kwargs)
    return info.value.reason


def test_a_declared_script_is_planned_with_an_absolute_interpreter(catalog: Catalog) -> None:
    prepared = make_runner({"DEMO_KEY": SECRET}).prepare(catalog, "demo", "scripts/ok.py", ["a"])
    plan = prepared.plan
    assert os.path.isabs(plan.interpreter_path) and plan.interpreter_path == plan.argv[0]
    assert plan.argv[1] == str(catalog.skills["demo"].directory / "scripts/ok.py")
    assert plan.argv[2:] == ("a",) and plan.cwd == str(catalog.skills["demo"].directory)
    assert prepared.will_run["scriptDigest"].startswith("sha256:")


def test_an_undeclared_script_is_refused_and_the_declared_ones_listed(catalog: Catalog) -> None:
    with pytest.raises(SkillMcpError) as info:
        make_runner().prepare(catalog, "demo", "scripts/undeclared.py", [])
    assert info.value.reason == Refusal.UNDECLARED_SCRIPT
    assert info.value.data["declared"] == ["scripts/ok.py", "scripts/ok.js", "scripts/ok.sh"]


def test_an_unknown_skill_is_refused(catalog: Catalog) -> None:
    assert refusal(make_runner().prepare, catalog, "nope", "scripts/ok.py", []) == Refusal.UNKNOWN_SKILL


def test_a_missing_interpreter_is_refused_naming_the_set(catalog: Catalog) -> None:
    runner = make_runner(interpreters=resolve_interpreters(only=("python",)))
    with pytest.raises(SkillMcpError) as info:
        runner.prepare(catalog, "demo", "scripts/ok.js", [])
    assert info.value.reason == Refusal.INTERPRETER_UNAVAILABLE
    assert info.value.data["available"] == ["python"]


def test_an_interpreter_outside_the_closed_set_is_refused(catalog: Catalog) -> None:
    assert refusal(make_runner().prepare, catalog, "demo", "scripts/ok.sh", []) == Refusal.INTERPRETER_UNAVAILABLE


def test_interpreters_resolve_on_the_fixed_path_not_the_callers(root: Path, monkeypatch) -> None:
    fake = root / "python3"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(root))
    found = resolve_interpreters()
    assert found.paths and all(not p.startswith(str(root)) for p in found.paths.values())


def test_hosted_without_grants_refuses_a_declared_script(catalog: Catalog) -> None:
    runner = make_runner({"MCP_DATA_DIR": "/tmp"})
    assert refusal(runner.prepare, catalog, "demo", "scripts/ok.py", []) == Refusal.NOT_GRANTED


def test_hosted_with_a_grant_runs_it(catalog: Catalog) -> None:  # positive control for the line above
    grant = json.dumps([{"skill": "demo", "script": "scripts/ok.py"}])
    prepared = make_runner({"MCP_DATA_DIR": "/tmp", "MCP_SKILL_RUN": grant}).prepare(
        catalog, "demo", "scripts/ok.py", []
    )
    assert prepared.plan.env["MCP_DATA_DIR"] == "/tmp"


def test_the_environment_is_built_from_nothing(catalog: Catalog) -> None:
    env = {
        "DEMO_KEY": SECRET,
        "OTHER_SECRET": "x",
        "LD_PRELOAD": "/evil.so",
        "PYTHONPATH": "/evil",
        "LANG": "C.UTF-8",
        "HOME": "/home/u",
    }
    plan = make_runner(env).prepare(catalog, "demo", "scripts/ok.py", []).plan
    assert set(plan.env) == {"PATH", "HOME", "LANG", "TMPDIR", "SKILL_OUTPUT_DIR", "DEMO_KEY"}
    assert plan.env["DEMO_KEY"] == SECRET


def test_the_preview_names_variables_but_never_shows_a_value(catalog: Catalog) -> None:
    will_run = make_runner({"DEMO_KEY": SECRET}).prepare(catalog, "demo", "scripts/ok.py", []).will_run
    assert SECRET not in json.dumps(will_run)
    fields = {f["name"]: f for f in will_run["env"]}
    assert fields["DEMO_KEY"]["present"] is True and fields["ABSENT_KEY"]["present"] is False
    assert "DEMO_KEY" in will_run["envWarning"]  # standalone hands a server variable: the preview says so


def test_no_env_warning_when_an_owner_granted_the_variable(catalog: Catalog) -> None:
    grant = json.dumps([{"skill": "demo", "script": "scripts/ok.py", "env": ["DEMO_KEY"]}])
    will_run = (
        make_runner({"DEMO_KEY": SECRET, "MCP_SKILL_RUN": grant}).prepare(catalog, "demo", "scripts/ok.py", []).will_run
    )
    assert "envWarning" not in will_run
    assert [f["name"] for f in will_run["env"] if f.get("grantedBy")] == ["DEMO_KEY"]


def test_the_timeout_is_clamped_to_the_ceiling(catalog: Catalog) -> None:
    assert make_runner().prepare(catalog, "demo", "scripts/ok.py", []).plan.timeout_s == 300


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["a\x00b"], Refusal.INVALID_ARGUMENTS),
        ([1], Refusal.INVALID_ARGUMENTS),
        (["\udc80"], Refusal.INVALID_ARGUMENTS),
        (["x"] * (MAX_ARGS + 1), Refusal.TOO_MANY_ARGS),
        (["x" * (MAX_ARG_CHARS + 1)], Refusal.TOO_MANY_ARGS),
        (["x" * MAX_ARG_CHARS] * 9, Refusal.TOO_MANY_ARGS),
        ("not-a-list", Refusal.INVALID_ARGUMENTS),
    ],
)
def test_arguments_are_bounded_and_nul_is_refused(catalog: Catalog, args: object, reason: Refusal) -> None:
    assert refusal(make_runner().prepare, catalog, "demo", "scripts/ok.py", args) == reason


def test_arguments_at_the_bounds_are_accepted(catalog: Catalog) -> None:  # positive control
    args = ["x" * MAX_ARG_CHARS] * 8
    assert make_runner().prepare(catalog, "demo", "scripts/ok.py", args).plan.argv[2:] == tuple(args)


def _declared(root: Path, rel: str, files: dict[str, str] | None = None) -> Catalog:
    return catalog_of(make_skill(root, "s", files or {}, [ScriptDecl(rel, "python")]))


@pytest.mark.parametrize(
    "rel", ["/etc/passwd", "../s/x.py", "./x.py", "a/../x.py", "a\\x.py", "x%2epy", "a//x.py", "x.py\x00", "x\n.py"]
)
def test_the_string_check_refuses_shapes_that_must_never_be_joined(root: Path, rel: str) -> None:
    # Several of these would resolve inside the skill; the string check refuses them anyway.
    (root / "s" / "a").mkdir(parents=True)
    (root / "s" / "x.py").write_text("1")
    catalog = _declared(root, rel)
    assert refusal(make_runner().prepare, catalog, "s", rel, []) == Refusal.INVALID_PATH


def test_a_symlink_planted_inside_the_bundle_is_refused(root: Path) -> None:
    outside = root / "outside.py"
    outside.write_text("print('escaped')\n")
    catalog = _declared(root, "link.py")
    (root / "s" / "link.py").symlink_to(outside)
    assert refusal(make_runner().prepare, catalog, "s", "link.py", []) == Refusal.OUTSIDE_SKILL


def test_a_symlink_that_stays_inside_is_allowed(root: Path) -> None:  # positive control
    catalog = _declared(root, "link.py", {"real.py": "1\n"})
    (root / "s" / "link.py").symlink_to(root / "s" / "real.py")
    assert make_runner().prepare(catalog, "s", "link.py", []).plan.argv[1].endswith("/s/real.py")


def test_a_directory_or_fifo_is_not_a_script(root: Path) -> None:
    catalog = _declared(root, "d")
    (root / "s" / "d").mkdir()
    assert refusal(make_runner().prepare, catalog, "s", "d", []) == Refusal.NOT_A_FILE
    catalog = _declared(root, "f")
    os.mkfifo(root / "s" / "f")
    assert refusal(make_runner().prepare, catalog, "s", "f", []) == Refusal.NOT_A_FILE


def test_a_declared_but_missing_script_is_not_found(root: Path) -> None:
    catalog = _declared(root, "gone.py")
    assert refusal(make_runner().prepare, catalog, "s", "gone.py", []) == Refusal.NOT_FOUND


def test_root_without_a_user_to_drop_to_refuses(root: Path) -> None:
    catalog = _declared(root, "x.py", {"x.py": "1\n"})
    runner = make_runner({"SKILL_MCP_SCRIPT_USER": "no-such-user-h2"}, euid=0)
    assert refusal(runner.prepare, catalog, "s", "x.py", []) == Refusal.ROOT_WITHOUT_DROP
    runner = make_runner({"SKILL_MCP_SCRIPT_USER": "root"}, euid=0)
    assert refusal(runner.prepare, catalog, "s", "x.py", []) == Refusal.ROOT_WITHOUT_DROP
    assert make_runner({}, euid=0).runs_as is not None  # positive control: nobody exists here


def test_hosted_and_unscrubbed_refuses_unless_the_owner_accepts(root: Path) -> None:
    catalog = _declared(root, "x.py", {"x.py": "1\n"})
    grant = json.dumps([{"skill": "s", "script": "x.py"}])
    env = {"MCP_DATA_DIR": "/tmp", "MCP_SKILL_RUN": grant}
    assert refusal(make_runner(env, harden=None).prepare, catalog, "s", "x.py", []) == Refusal.ENVIRON_UNSCRUBBED
    make_runner({**env, "MCP_SKILL_ALLOW_UNSCRUBBED": "1"}, harden=None).prepare(catalog, "s", "x.py", [])
    make_runner(env).prepare(catalog, "s", "x.py", [])  # scrubbed: runs


def test_standalone_and_unscrubbed_still_runs_and_says_so(root: Path) -> None:
    # The warning line is written once, by the boot (tests/fence/test_deferred.py); the runner
    # built from that boot fact prepares the run and reports the unwiped block in skill_list.
    catalog = _declared(root, "x.py", {"x.py": "1\n"})
    from skill_mcp.runner.harden import HardenReport

    runner = make_runner(harden=HardenReport(False, True, "test"))
    runner.prepare(catalog, "s", "x.py", [])
    assert "environ-unscrubbed" in [p.reason for p in runner.report(catalog).problems]


def test_interpreters_object_refuses_unknown_names() -> None:
    assert refusal(Interpreters({}).path_for, "python") == Refusal.INTERPRETER_UNAVAILABLE
