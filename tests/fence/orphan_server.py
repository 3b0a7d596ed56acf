"""A minimal "server" for the orphan test: runs one long script through a Runner until killed.

Argv: ``SKILL_ROOT``. The script names itself (``exec -a``) so that the test finds its pid.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

from skill_mcp.config import load_settings
from skill_mcp.models import ScriptDecl
from skill_mcp.runner.core import Runner
from skill_mcp.runner.harden import HardenReport
from tests.fence.helpers import one_script_catalog


def main() -> None:
    root = Path(sys.argv[1])
    runner = Runner.create(
        load_settings((), dict(os.environ)), harden=HardenReport(True, True), audit=lambda record: None
    )
    catalog = one_script_catalog(root, "long", ScriptDecl("long.sh", "bash", timeout=120))
    prepared = runner.prepare(catalog, "long", "long.sh", [])
    anyio.run(lambda: runner.execute(prepared, confirmed=True))


if __name__ == "__main__":
    main()
