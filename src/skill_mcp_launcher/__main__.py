"""``python -m skill_mcp_launcher /server/command ...`` - the container entrypoint."""

import sys

from skill_mcp_launcher.boot import main

sys.exit(main())
