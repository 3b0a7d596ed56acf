"""``python -m skill_mcp ...``: the same command line as the ``skill-mcp`` console script.

Client configurations often start a server as ``python -m <module> serve``; this makes the
package itself such a module, so a configuration needs no knowledge of where the console script
was installed.
"""

import sys

from skill_mcp.cli.main import main

sys.exit(main())
