"""Hypothesis properties of the fence's pure core: grants never widen a declaration; argv is verbatim."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skill_mcp.declwire import DeclaredScript, DeclaredSkill
from skill_mcp.errors import SkillMcpError
from skill_mcp.models import Catalog, Declaration, ScriptDecl, Skill
from skill_mcp.runner.grants import build_grants, forbidden_variable
from skill_mcp.runner.plan import check_args
from skill_mcp.runner.tokens import TokenBook
from skill_mcp_launcher.policy import Grants

from .helpers import catalog_of, make_skill

SKILLS = ["weather", "other", "ghost"]
SCRIPTS = ["f.js", "x.py", "evil.sh", "../f.js"]
VARS = ["WEATHER_KEY", "OTHER_KEY", "GITHUB_TOKEN", "LD_PRELOAD", "PYTHONPATH", "PATH"]
HOSTS = ["api.weather.example", "evil.example"]

SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # not encodable: an argument never holds one


@pytest.fixture(scope="module")
def catalog() -> Iterator[Catalog]:
    tmp = Path(tempfile.mkdtemp(prefix="skill-mcp-prop-"))
    try:
        yield catalog_of(
            make_skill(
                tmp,
                "weather",
                {"f.js": "1"},
                [ScriptDecl("f.js", "node", env=("WEATHER_KEY", "LD_PRELOAD"))],
                egress=["api.weather.example"],
            ),
            make_skill(tmp, "other", {"x.py": "1"}, [ScriptDecl("x.py", "python", env=("OTHER_KEY",))]),
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


row = st.fixed_dictionaries(
    {"skill": st.sampled_from(SKILLS), "script": st.sampled_from(SCRIPTS)},
    optional={"env": st.lists(st.sampled_from(VARS), max_size=4), "egress": st.lists(st.sampled_from(HOSTS))},
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(row, max_size=6), hosted=st.booleans())
def test_no_grant_row_makes_anything_runnable_that_was_not_declared(
    catalog: Catalog, rows: list[dict[str, object]], hosted: bool
) -> None:
    grants = build_grants(catalog, json.dumps(rows), hosted=hosted)
    for (skill_name, script), grant in grants.grants.items():
        decl = catalog.skills[skill_name].declaration
        assert decl is not None
        declared = decl.script(script)
        assert declared is not None
        assert set(grant.env) <= set(declared.env)
        assert all(forbidden_variable(name) is None for name in grant.env)
        assert set(grant.egress) <= set(decl.egress)


@given(
    args=st.lists(
        st.text(alphabet=st.characters(exclude_categories=SURROGATES, exclude_characters="\x00"), max_size=50),
        max_size=20,
    )
)
def test_arguments_within_bounds_pass_through_verbatim(args: list[str]) -> None:
    assert check_args(args) == tuple(args)


@given(args=st.lists(st.text(max_size=20), min_size=1, max_size=5), nul_at=st.integers(min_value=0, max_value=4))
def test_a_nul_anywhere_is_refused(args: list[str], nul_at: int) -> None:
    args = list(args)
    i = nul_at % len(args)
    args[i] = args[i] + "\x00"
    try:
        check_args(args)
    except SkillMcpError:
        return
    raise AssertionError("a NUL argument was accepted")


@given(a=st.binary(max_size=64), b=st.binary(max_size=64))
def test_a_token_checks_only_against_its_own_plan(a: bytes, b: bytes) -> None:
    book = TokenBook(clock=lambda: 0.0)
    token = book.mint(a)
    if a == b:
        assert book.check(token, b)
    else:
        try:
            book.check(token, b)
        except SkillMcpError as exc:
            assert exc.reason == "DRAFT_CHANGED"
        else:
            raise AssertionError("a token checked against another plan")


declaration = st.fixed_dictionaries(
    {
        "scripts": st.lists(st.sampled_from(SCRIPTS[:3]), unique=True, min_size=1, max_size=3),
        "env": st.lists(st.sampled_from(VARS), unique=True, max_size=4),
        "egress": st.lists(st.sampled_from(HOSTS), unique=True, max_size=2),
    }
)


def _server_skill(name: str, decl: dict[str, list[str]]) -> Skill:
    run = tuple(ScriptDecl(s, "python", env=tuple(decl["env"])) for s in decl["scripts"])
    return Skill(
        name=name,
        directory=Path("/nonexistent") / name,
        found_at=f"/nonexistent/{name}",
        root=Path("/nonexistent"),
        frontmatter={"name": name},
        description="test",
        files=(),
        body_offset=0,
        declaration=Declaration(version=1, run=run, egress=tuple(decl["egress"])),
    )


def _broker_skill(name: str, decl: dict[str, list[str]]) -> DeclaredSkill:
    scripts = tuple(DeclaredScript(s, "python", tuple(decl["env"]), 30) for s in decl["scripts"])
    return DeclaredSkill(name, f"/nonexistent/{name}", (0, 0, 0, 0, 0), tuple(decl["egress"]), scripts)


@given(
    decls=st.dictionaries(st.sampled_from(SKILLS[:2]), declaration, min_size=1),
    rows=st.one_of(st.none(), st.lists(row, max_size=6)),
    hosted=st.booleans(),
)
def test_the_server_and_the_broker_grant_the_same(
    decls: dict[str, dict[str, list[str]]], rows: list[dict[str, object]] | None, hosted: bool
) -> None:
    # The server (runner.grants, what skill_list shows) and the appliance's broker (policy.Grants,
    # what it runs) read MCP_SKILL_RUN on their own; on any declarations and rows they must agree.
    raw = None if rows is None else json.dumps(rows)
    server = build_grants(catalog_of(*(_server_skill(n, d) for n, d in decls.items())), raw, hosted=hosted)
    environ = {**({"MCP_SKILL_RUN": raw} if raw is not None else {}), **({"MCP_DATA_DIR": "/data"} if hosted else {})}
    broker = Grants.from_environ(environ)
    for name, decl in decls.items():
        skill = _broker_skill(name, decl)
        for script in decl["scripts"]:
            declared = skill.script(script)
            assert declared is not None
            ours, theirs = server.get(name, script), broker.allowed(skill, declared)
            assert (ours is None) == (theirs is None)
            if ours is not None and theirs is not None:
                assert (ours.env, ours.egress) == (theirs.env, theirs.egress)
