"""``skill-mcp serve``: the stdio server (or Streamable HTTP with ``--http``).

Stdout belongs to the protocol from here on: nothing in this module prints.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skill_mcp.cli import exits

if TYPE_CHECKING:  # pragma: no cover - typing only
    import argparse

TOKEN_FILE_MAX_BYTES = 4096
# The errors binding a listener gives, with what to do about each.
_LISTEN_ERRORS = {
    errno.EADDRINUSE: " (another process listens there: stop it, or pick another port with --http HOST:PORT)",
    errno.EADDRNOTAVAIL: " (no interface of this machine has that address)",
    errno.EACCES: " (ports below 1024 need privileges: pick a port above 1023)",
}


def _blocking(result: Any) -> int:
    """Accept a blocking entry point or an async one; map its return to an exit code."""
    import inspect  # not on the stdio path, which answers the handshake before this would be needed

    if inspect.isawaitable(result):
        import anyio

        async def _await() -> Any:
            return await result

        result = anyio.run(_await)
    return int(result) if isinstance(result, int) else exits.OK


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file:
        try:
            with open(Path(args.token_file), "rb") as handle:
                raw = handle.read(TOKEN_FILE_MAX_BYTES + 1)
        except OSError as err:
            raise exits.CliError(exits.UNAVAILABLE, f"cannot read --token-file: {err.strerror}") from err
        if len(raw) > TOKEN_FILE_MAX_BYTES:
            raise exits.CliError(exits.USAGE, "--token-file is larger than 4 KiB")
        token = raw.decode("utf-8", "replace").strip()
        if not token:
            # Said as such: "needs a bearer token" would send the reader looking for a missing
            # setting when the file is there and holds nothing.
            raise exits.CliError(
                exits.USAGE,
                f"--token-file {args.token_file}: the token file is empty; "
                "write the token into it (at least 16 visible ASCII characters)",
            )
        return token
    return os.environ.get("MCP_HTTP_TOKEN") or None


def run(args: argparse.Namespace) -> int:
    from skill_mcp.config import load_settings
    from skill_mcp.errors import SkillMcpError
    from skill_mcp.reasons import Refusal

    if getattr(args, "metrics", None) and not args.http:
        raise exits.CliError(exits.USAGE, "--metrics needs --http (over stdio, export with the OTEL_* variables)")
    settings = load_settings(args.skills_dirs, os.environ, watch=args.watch)
    # --watch: a provider that reloads; both transports run its watcher beside the server and
    # announce list_changed after each swap (server.announce_reloads).
    provider: Any = None
    if args.watch:
        from skill_mcp.catalog.watch import LiveCatalog

        provider = LiveCatalog(settings)
    else:
        from skill_mcp.cli.progress import Progress, is_terminal

        if is_terminal(sys.stderr):
            # A person at a terminal sees the first catalog build (a client's log never does).
            from skill_mcp.catalog.lazy import LazyCatalog

            provider = LazyCatalog(settings, progress=Progress.on_stderr("reading skills").update)
    try:
        if args.http:
            # Imported here: the SDK and the server are heavy and --help must stay fast.
            from skill_mcp.server import serve_http
            from skill_mcp.surfaces.http.guard import parse_host_port

            host, port = parse_host_port(args.http)
            return _blocking(
                serve_http(
                    settings,
                    host,
                    port,
                    _token(args),
                    args.no_auth,
                    allowed_hosts=tuple(args.allowed_hosts),
                    catalog_provider=provider,
                    metrics=getattr(args, "metrics", None),
                )
            )
        from skill_mcp.server import serve_stdio_early
    except ImportError as err:
        raise exits.CliError(exits.UNAVAILABLE, f"the server could not be loaded: {err}") from err
    except SkillMcpError as err:
        raise exits.CliError(exits.UNAVAILABLE, err.detail, str(err.reason)) from err
    except ValueError as err:
        raise exits.CliError(exits.USAGE, f"--http: {err}") from err
    except OSError as err:
        if err.errno not in _LISTEN_ERRORS:
            raise
        # The address the transport refuses (docs/cli.md: exit 3), in one line.
        raise exits.CliError(
            exits.UNAVAILABLE,
            f"cannot listen on {args.http}: {err.strerror}" + _LISTEN_ERRORS[err.errno],
            str(Refusal.HTTP_LISTEN_FAILED),
        ) from err
    try:
        return serve_stdio_early(settings, provider)
    except SkillMcpError as err:
        raise exits.CliError(exits.UNAVAILABLE, err.detail, str(err.reason)) from err
