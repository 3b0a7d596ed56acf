"""A minimal "server" for the same-uid test: boots a Runner and runs one probe script.

Run as an unprivileged user by ``test_harden.py`` (a root reader passes every /proc check,
so the protection can only be observed between two processes of one ordinary uid). Argv:
``hardened|plain|confined-only SKILL_ROOT``: ``hardened`` is the server as it boots; ``plain``
skips both the hardening and the script's sandbox (the positive control); ``confined-only`` skips
the hardening and keeps the sandbox, whose ptrace rule must hold on its own. Prints the run's result as one JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from skill_mcp.config import load_settings
from skill_mcp.models import ScriptDecl
from skill_mcp.runner.core import Runner
from skill_mcp.runner.deferred import DeferredRunner
from skill_mcp.runner.spawn_local import LocalSpawner
from tests.fence.helpers import one_script_catalog


def main() -> None:
    mode, root = sys.argv[1], Path(sys.argv[2])
    settings = load_settings((), dict(os.environ))
    quiet: dict[str, Any] = {"audit": lambda record: None}
    runner = (
        DeferredRunner.boot(settings, **quiet).get()
        if mode == "hardened"
        else Runner.create(settings, harden=None, spawner=LocalSpawner(confined=mode != "plain"), **quiet)
    )
    catalog = one_script_catalog(root, "probe", ScriptDecl("probe.py", "python"))
    prepared = runner.prepare(catalog, "probe", "probe.py", [str(os.getpid())])
    result = anyio.run(lambda: runner.execute(prepared, confirmed=True))
    sys.stdout.write(json.dumps({"result": result, "environ_still_there": os.environ.get("PROBE_SECRET")}) + "\n")


if __name__ == "__main__":
    main()
