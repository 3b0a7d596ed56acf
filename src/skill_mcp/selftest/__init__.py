"""The appliance's posture self-test, server side (``skill_mcp_launcher selftest`` starts it).

``agent`` hosts the real server and drives it over stdio; ``wire`` is its small MCP client;
``observe`` is what the server's uid can see; ``verdicts`` turns observations into the
report. The launcher side (probe skill, grants, canary) is ``skill_mcp_launcher.selftest``.
"""
