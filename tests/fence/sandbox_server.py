"""A minimal server for the sandbox tests: boots the runner as production does and runs one script.

Run by ``test_sandbox.py`` as an unprivileged user (same-uid protections can only be observed
between processes of one ordinary uid). Argv: ``SKILLS_ROOT SKILL SCRIPT [ARGS...]``. Prints one
JSON line: the run's result, or the refusal, and the script's state as ``skill_list`` reports it.
"""

from __future__ import annotations

import json
import os
import sys

import anyio

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.errors import SkillMcpError
from skill_mcp.runner.deferred import DeferredRunner


def main() -> None:
    root, skill, script, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    settings = load_settings([root], dict(os.environ))
    catalog = build_catalog(settings)
    runner = DeferredRunner.boot(settings).get()
    states = runner.report(catalog).skill_dict(skill)["scripts"]
    out: dict[str, object] = {"states": states}
    try:
        prepared = runner.prepare(catalog, skill, script, args)
        out["result"] = anyio.run(lambda: runner.execute(prepared, confirmed=True))
    except SkillMcpError as exc:
        out["refused"], out["detail"] = str(exc.reason), exc.detail
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
