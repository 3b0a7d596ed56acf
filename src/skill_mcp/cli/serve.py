"""``skill-mcp serve``: the stdio server. Stdout belongs to the protocol from here on."""

from __future__ import annotations

import argparse
import inspect
import os

from skill_mcp.cli import exits


def run(args: argparse.Namespace) -> int:
    from skill_mcp.config import load_settings

    settings = load_settings(args.skills_dirs, os.environ, watch=args.watch)
    try:
        # Imported here: the SDK and the server are heavy and --help must stay fast.
        from skill_mcp.server import serve_stdio
    except ImportError as err:
        raise exits.CliError(exits.UNAVAILABLE, f"the server could not be loaded: {err}") from err
    result = serve_stdio(settings)
    if inspect.isawaitable(result):
        # Tolerate an async entry point as well as a blocking one.
        import anyio

        async def _await() -> object:
            return await result

        result = anyio.run(_await)
    return int(result) if isinstance(result, int) else exits.OK
