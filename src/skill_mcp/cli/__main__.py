"""``python -m skill_mcp.cli ...`` - the same as the ``skill-mcp`` console script."""

import sys

from skill_mcp.cli.main import main

sys.exit(main())
