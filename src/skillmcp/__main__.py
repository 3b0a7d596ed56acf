"""``python -m skillmcp ...``: the ``skill-mcp`` command line under the ``skillmcp`` module name."""

import sys

from skill_mcp.cli.main import main

sys.exit(main())
