"""skill-mcp: an MCP server for a directory of Agent Skills.

Layering (data flows one way; a lower layer never imports a higher one):

    config -> catalog -> surfaces (the only code that imports ``mcp``) -> runner -> spawner
                 |-> search
    cli builds the server from config; the launcher (container PID 1) is a separate,
    stdlib-only program.

``reasons``, ``models``, ``errors`` and ``paths`` are leaf modules that import only the
standard library, so the launcher may reuse them without pulling in the SDK. This module
imports nothing on purpose: importing the package must stay cheap.
"""

__version__ = "0.1.0"
