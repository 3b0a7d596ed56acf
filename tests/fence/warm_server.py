"""A minimal "server" for the warm-shim tests: a Runner on an event loop with a shim waiting.

Argv: ``idle|probe SKILL_ROOT``. Inside one event loop it prepares the ``probe`` skill's
``probe.py`` (which starts the shim for the next run) and prints one JSON line on stdout:
``{"server": <pid>, "warm": <pid of the waiting shim>}``. Then:

- ``idle``: waits until killed (the test kills it and watches the shim);
- ``probe``: runs ``probe.py`` (through that shim) and prints its result as a second JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

from skill_mcp.config import load_settings
from skill_mcp.models import ScriptDecl
from skill_mcp.runner.deferred import DeferredRunner
from tests.fence.helpers import one_script_catalog


def _say(value: object) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def serve(mode: str, root: Path) -> None:
    runner = DeferredRunner.boot(load_settings((), dict(os.environ)), audit=lambda record: None).get()
    catalog = one_script_catalog(root, "probe", ScriptDecl("probe.py", "python", timeout=60))
    prepared = runner.prepare(catalog, "probe", "probe.py", [])
    _say({"server": os.getpid(), "warm": getattr(runner.spawner, "warm_pid", None)})
    if mode == "idle":
        await anyio.sleep_forever()
    _say(await runner.execute(prepared, confirmed=True))
    runner.stop_running()


if __name__ == "__main__":
    anyio.run(serve, sys.argv[1], Path(sys.argv[2]))
