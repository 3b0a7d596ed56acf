"""The standalone script environment's run-time step: the plan's names, the run's directory."""

from __future__ import annotations

from skill_mcp.runner.script_env import spawn_env
from skill_mcp.runner.types import TMPDIR_PLACEHOLDER

PLAN_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/owner",
    "LANG": "C.UTF-8",
    "TMPDIR": TMPDIR_PLACEHOLDER,
    "SKILL_OUTPUT_DIR": TMPDIR_PLACEHOLDER,
    "API_KEY": "k",
}


def test_an_unconfined_script_under_the_servers_uid_keeps_the_owners_home() -> None:
    env = spawn_env(PLAN_ENV, "/tmp/skill-mcp-run-1-x", private_home=False)
    assert env == {**PLAN_ENV, "TMPDIR": "/tmp/skill-mcp-run-1-x", "SKILL_OUTPUT_DIR": "/tmp/skill-mcp-run-1-x/out"}


def test_a_confined_script_or_one_under_a_uid_of_its_own_gets_the_run_directory_as_home() -> None:
    # The server's HOME is not the dropped user's to write, nor a confined script's to read.
    env = spawn_env(PLAN_ENV, "/tmp/skill-mcp-run-1-x", private_home=True)
    assert env["HOME"] == env["TMPDIR"] == "/tmp/skill-mcp-run-1-x"
    assert set(env) == set(PLAN_ENV) and PLAN_ENV["TMPDIR"] == TMPDIR_PLACEHOLDER  # no name added, plan untouched
