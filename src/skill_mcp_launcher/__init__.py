"""The appliance's PID 1: a small privileged monitor.

It loads the egress ruleset, drops what it no longer needs, starts the MCP server as an
unprivileged user (without the owner's secret values), and runs each script the server asks
for as another unprivileged user - after deciding the run itself (``policy``) from the
owner's grant and the declarations an unprivileged helper read (``parse_helper``), and so that runs
share nothing (``isolation``). See ``boot`` for the sequence and docs/deploy.md for how to run
it. It imports the standard library, ``python-prctl`` (capabilities and prctl), ``psutil``
(processes) and the stdlib-only leaf modules of ``skill_mcp`` (row 0 of docs/architecture.md's
layers: ``paths``, ``errors``, ``reasons``, ``limits``, ``sandbox_rules``, ``grantrules``,
``declwire``, ``proctools``, ...); tests/appliance/test_launcher_imports.py holds it to that list.
"""
