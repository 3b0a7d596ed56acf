"""The environment a script gets in standalone mode: every name and value, built in one place.

A script never inherits the server's environment. It gets, in this order:

- ``PATH``: the server's own ``PATH`` or, when unset, ``limits.FIXED_PATH`` (the interpreters
  were resolved on the fixed path at boot, so a script's ``PATH`` never decides which
  interpreter runs);
- ``HOME``, ``LANG`` and ``TZ`` from the owner's environment when set (``HOME`` is replaced by
  the run's private directory when the script is confined, which is every run unless the owner
  opted out with ``SKILL_MCP_UNCONFINED=1``, or runs under a uid of its own: its sandbox lets it
  read and write no other home, and the server's home is not the dropped user's to write);
- ``TMPDIR``: a private directory the spawner makes for each run and removes after it;
- ``SKILL_OUTPUT_DIR``: an empty directory inside it, whose files come back as the run's outputs;
- ``MCP_DATA_DIR`` when the host set it;
- the variables the script declares and the owner grants (``runner.grants``), and nothing else.

Two steps, because the preview is built before any run exists: ``plan_env`` at prepare time
(values plus the names-only description the user approves), ``spawn_env`` when the spawner has
the run's directory. Both are the shared rule, ``skill_mcp.grantrules.owner_values`` and
``grantrules.exec_env``, which the appliance's broker applies too (``skill_mcp_launcher.policy``,
with ``HOME`` always the run's directory, the fixed ``PATH`` and the proxy variables added);
tests/launcher/test_shared_rules.py holds the two sides equal. Which names a declaration may
never name (loader and interpreter start-up variables, the fixed ones) is ``grantrules`` too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skill_mcp.grantrules import FROM_OWNER, exec_env, owner_values
from skill_mcp.limits import FIXED_PATH
from skill_mcp.outputs import OUTPUT_ENV
from skill_mcp.runner.types import TMPDIR_PLACEHOLDER

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.runner.grants import ScriptGrant


def plan_env(
    grant: ScriptGrant, environ: Mapping[str, str], data_dir: str | None, held: frozenset[str] = frozenset()
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The script's environment for one plan, and the preview's description of it (names only).

    ``TMPDIR`` holds ``TMPDIR_PLACEHOLDER`` until ``spawn_env`` fills it. ``held`` names the
    values the appliance's launcher holds and hands to the script itself: the plan carries
    such a name with an empty value (the broker is sent names, never values).
    """
    values = owner_values(environ, grant.env, data_dir=data_dir)
    values.update({n: "" for n in grant.env if n in held and n not in environ})
    env = exec_env(values, TMPDIR_PLACEHOLDER, path=environ.get("PATH") or FIXED_PATH, home=environ.get("HOME") or None)
    env[OUTPUT_ENV] = TMPDIR_PLACEHOLDER  # no run directory yet: ``spawn_env`` fills both
    fields: list[dict[str, Any]] = [{"name": "PATH", "from": "fixed"}]
    fields += [{"name": n, "from": "fixed"} for n in ("HOME", *FROM_OWNER) if n in env]
    fields.append({"name": "TMPDIR", "from": "fixed", "note": "a private directory per run, removed after"})
    fields.append(
        {
            "name": OUTPUT_ENV,
            "from": "fixed",
            "note": "an empty directory per run; the files left there come back as skill-run:// resources",
        }
    )
    if "MCP_DATA_DIR" in env:
        fields.append({"name": "MCP_DATA_DIR", "from": "host"})
    accepted = "MCP_SKILL_RUN" if grant.source == "MCP_SKILL_RUN" else "standalone default (the declaration stands)"
    for name in grant.env:
        present = name in environ or name in held
        fields.append({"name": name, "from": "declared by the script", "grantedBy": accepted, "present": present})
    return env, fields


def spawn_env(plan_env: Mapping[str, str], run_dir: str, *, private_home: bool) -> dict[str, str]:
    """The environment the local spawner execs the script with: the plan's, with ``TMPDIR`` the
    run's private directory, and ``HOME`` too when ``private_home``: the script is confined (its
    sandbox lets it write nowhere else) or runs under a uid of its own."""
    home = run_dir if private_home else plan_env.get("HOME")
    return exec_env(plan_env, run_dir, path=plan_env.get("PATH") or FIXED_PATH, home=home)
