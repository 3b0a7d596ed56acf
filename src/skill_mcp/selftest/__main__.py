"""``python -I -m skill_mcp.selftest FACTS``: started by the launcher as the server, never by hand."""

import sys

from skill_mcp.selftest.agent import main

sys.exit(main(sys.argv[1:]))
