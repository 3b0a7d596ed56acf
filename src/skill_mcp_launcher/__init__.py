"""The appliance's PID 1: a small privileged monitor.

It loads the egress ruleset, drops what it no longer needs, starts the MCP server as an
unprivileged user, and runs each script the server asks for as another unprivileged user,
re-checking the request first. See ``boot`` for the sequence and docs/deploy.md for how to
run it. It imports the standard library, ``python-prctl`` (capabilities and prctl),
``psutil`` (processes) and the stdlib-only leaf modules of ``skill_mcp`` (``paths``,
``errors``, ``reasons``); tests/appliance/test_launcher_imports.py holds it to that list.
"""
