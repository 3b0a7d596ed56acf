"""Exit codes (documented in docs/cli.md) and the one error type commands raise."""

from __future__ import annotations

OK = 0
PROBLEM = 1  # ran fine and found a problem: validation errors, a tool error, nothing to show
USAGE = 2  # bad arguments (argparse also exits 2)
UNAVAILABLE = 3  # a root, the server or a file could not be read or started
INTERRUPTED = 130


class CliError(Exception):
    """Raised by a command to end with ``code``; ``message`` goes to stderr."""

    def __init__(self, code: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
