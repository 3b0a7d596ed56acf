"""``skillmcp``: the module name of the ``skillmcp`` client configuration (``python -m skillmcp``).

The project's package is ``skill_mcp``; this one only forwards, so a configuration written as
``"command": "python", "args": ["-m", "skillmcp", "serve", ...]`` starts the same command line
as ``skill-mcp``. It imports nothing until it runs.
"""
