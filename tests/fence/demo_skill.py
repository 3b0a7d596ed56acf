"""The demo skill both skill_run end-to-end suites (stdio and HTTP) serve."""

ECHO = "import json, sys\nopen(sys.argv[1], 'a').write('ran\\n')\nprint(json.dumps(sys.argv[2:]))\n"
SKILL_MD = """---
name: demo
description: Echoes its arguments.
mcp-host:
  version: 1
  run:
    - script: scripts/echo.py
      interpreter: python
      timeout: 20
---
Run scripts/echo.py.
"""
