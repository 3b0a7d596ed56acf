"""The ``skill-mcp`` command line.

Every subcommand has ``--help``, prints for a person by default and JSON with ``--json``, writes
errors to stderr and exits with a documented code (docs/cli.md):

    0  success
    1  the command ran and found a problem (validate found an error-level problem, a tool call
       returned an error, a search found nothing for ``show``)
    2  usage error (bad arguments, unreadable --args JSON, unknown subcommand)
    3  the server or a root could not be started or read

Heavy imports (the SDK, the server, the catalog) happen inside each command so ``--help``
stays fast.
"""

from skill_mcp.cli.main import main

__all__ = ["main"]
