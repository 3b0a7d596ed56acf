"""The decisions the server and the appliance's broker both make are one rule, held equal here.

Each property gives both sides the same inputs and compares what each computes through its own
code path: the server's (``config``, ``runner.grants``, ``runner.script_env``, the runner-less
``surfaces.declared_scripts``) and the broker's (``skill_mcp_launcher.policy``). The rule itself
lives once in a leaf (``skill_mcp.grantrules``); these tests fail when a side stops calling it
or adds a rule of its own. (The grant intersection's own property is
tests/fence/test_properties.py, ``test_the_server_and_the_broker_grant_the_same``.)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skill_mcp.config import load_settings
from skill_mcp.declwire import DeclaredScript, DeclaredSkill
from skill_mcp.grantrules import GRANT_SOURCES, HOSTED_MARKERS, NO_PROXY_ENV, PROXY_ENV, GrantRow, forbidden_variable
from skill_mcp.limits import FIXED_PATH
from skill_mcp.models import Catalog
from skill_mcp.runner.grants import ScriptGrant, build_grants
from skill_mcp.runner.script_env import plan_env, spawn_env
from skill_mcp.surfaces.declared_scripts import DeclaredScripts
from skill_mcp_launcher.checks import Request
from skill_mcp_launcher.policy import Grants, broker_env, decide

EMPTY = Catalog(roots=(), skills={}, problems=())
OTHER = ("HOME", "LANG", "TZ", "PATH", "SKILLS_DIR", "SKILL_MCP_LOG")


def _sources(environ: dict[str, str]) -> dict[str, str]:
    settings_ = load_settings(environ=environ)
    return {
        "config": settings_.grant_source,
        "runner.grants": build_grants(EMPTY, settings_.skill_run, hosted=settings_.hosted).grant_from,
        "surfaces.declared_scripts": str(DeclaredScripts(settings_).grant()["grantFrom"]),
        "launcher.policy": Grants.from_environ(environ).source,
    }


environs = st.dictionaries(
    st.sampled_from((*HOSTED_MARKERS, "MCP_SKILL_RUN", *OTHER)),
    st.sampled_from(("", "/x", "[]", "not json")),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(environ=environs)
def test_the_server_and_the_broker_name_the_same_grant_source(environ: dict[str, str]) -> None:
    # Hosted or not, granted or not: every side says the same word, from one vocabulary.
    found = _sources(environ)
    assert len(set(found.values())) == 1, found
    assert found["config"] in GRANT_SOURCES


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "declaration"),
        ({"MCP_DATA_DIR": "/data"}, "hosted-default"),
        ({"MCP_SKILLS_PATH": "/skills", "MCP_SKILL_RUN": "not json"}, "MCP_SKILL_RUN"),
    ],
)
def test_each_grant_source_is_reached(environ: dict[str, str], expected: str) -> None:
    # Positive control: the property above compares three different answers, not one constant;
    # a runner-less server once said "none" where the others said "hosted-default".
    assert set(_sources(environ).values()) == {expected}


SKILL, SCRIPT = "weather", "f.py"
DECLARED = ("WEATHER_KEY", "OTHER_KEY", "EMPTY_KEY", "HTTP_PROXY", "NO_PROXY", "LD_PRELOAD", "LANG", "MCP_DATA_DIR")
OWNER_NAMES = (*DECLARED, "HOME", "TZ", "SECRET", "TMPDIR", "SKILL_OUTPUT_DIR", "https_proxy")


@pytest.fixture(scope="module")
def skill_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="skill-mcp-shared-")).resolve()
    (root / SKILL).mkdir()
    (root / SKILL / SCRIPT).write_text("print(1)\n")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _without_proxy(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in (*PROXY_ENV, *NO_PROXY_ENV)}


@settings(max_examples=300, deadline=None)
@given(
    owner=st.dictionaries(st.sampled_from(OWNER_NAMES), st.sampled_from(("", "v", "/data")), max_size=8),
    granted=st.lists(st.sampled_from(DECLARED), unique=True, max_size=5),
    narrowed=st.booleans(),
)
def test_the_server_and_the_broker_build_the_same_script_environment(
    skill_root: Path, owner: dict[str, str], granted: list[str], narrowed: bool
) -> None:
    # The same owner environment and grant: the standalone spawner's environment (plan_env, then
    # spawn_env, with HOME the run's directory as in every confined run) and the broker's
    # (policy.decide, then broker_env) are equal but for the proxy the appliance adds, given the
    # image's PATH. ``narrowed``: the server names the plan's variables, as spawn_broker sends them.
    owner = {**owner, "PATH": FIXED_PATH}
    run_dir = "/run/skill-1"
    data_dir = owner.get("MCP_DATA_DIR")
    allowed = tuple(n for n in DECLARED if n in granted and forbidden_variable(n) is None)
    plan, _fields = plan_env(ScriptGrant(SKILL, SCRIPT, allowed, (), "MCP_SKILL_RUN"), owner, data_dir or None)
    server = spawn_env(plan, run_dir, private_home=True)

    directory = str(skill_root / SKILL)
    skill = DeclaredSkill(SKILL, directory, (0, 0, 0, 0, 0), (), (DeclaredScript(SCRIPT, "python", DECLARED, 30),))
    grants = Grants("MCP_SKILL_RUN", (GrantRow(SKILL, SCRIPT, tuple(granted)),))
    request = Request(SKILL, SCRIPT, (), env=tuple(sorted(plan)) if narrowed else None)
    job = decide(
        request,
        skills={SKILL: skill},
        grants=grants,
        interpreters={"python": "/usr/bin/python3"},
        roots=(str(skill_root),),
        environ=owner,
    )
    broker = broker_env(job.env, run_dir, 8888)

    assert _without_proxy(broker) == _without_proxy(server)
    assert {broker[n] for n in PROXY_ENV} == {"http://127.0.0.1:8888"}
    assert not set(NO_PROXY_ENV) & set(broker)


def test_the_script_environment_comparison_can_fail(skill_root: Path) -> None:
    # Positive control: an environment the owner set but nothing granted reaches neither side,
    # and a granted one reaches both, so the property above compares real values.
    owner = {"PATH": FIXED_PATH, "WEATHER_KEY": "k", "SECRET": "s", "LANG": "C.UTF-8"}
    plan, _fields = plan_env(ScriptGrant(SKILL, SCRIPT, ("WEATHER_KEY",), (), "MCP_SKILL_RUN"), owner, None)
    server = spawn_env(plan, "/run/skill-1", private_home=True)
    assert server["WEATHER_KEY"] == "k" and "SECRET" not in server and server["LANG"] == "C.UTF-8"
    assert server["HOME"] == server["TMPDIR"] == "/run/skill-1"
    assert server["SKILL_OUTPUT_DIR"] == "/run/skill-1/out"
    skill = DeclaredSkill(
        SKILL, str(skill_root / SKILL), (0, 0, 0, 0, 0), (), (DeclaredScript(SCRIPT, "python", ("WEATHER_KEY",), 30),)
    )
    job = decide(
        Request(SKILL, SCRIPT, ()),
        skills={SKILL: skill},
        grants=Grants("MCP_SKILL_RUN", (GrantRow(SKILL, SCRIPT, ()),)),
        interpreters={"python": "/usr/bin/python3"},
        roots=(str(skill_root),),
        environ=owner,
    )
    broker = broker_env(job.env, "/run/skill-1", 8888)
    assert "WEATHER_KEY" not in broker  # granted by no row here
    assert _without_proxy(broker) != _without_proxy(server)


def test_the_broker_owns_its_names_whatever_the_values_say() -> None:
    env = broker_env(
        {"PATH": "/evil", "HOME": "/", "HTTP_PROXY": "http://evil", "NO_PROXY": "*", "KEEP": "1"}, "/s/run-1", 8888
    )
    assert env["PATH"] == FIXED_PATH and env["HOME"] == env["TMPDIR"] == "/s/run-1"
    assert env["HTTP_PROXY"] == env["https_proxy"] == "http://127.0.0.1:8888"
    assert env["SKILL_OUTPUT_DIR"] == "/s/run-1/out" and env["KEEP"] == "1" and "NO_PROXY" not in env
