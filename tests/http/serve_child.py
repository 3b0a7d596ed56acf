"""Start the real server over Streamable HTTP, as ``skill-mcp serve --http`` would.

Run as a script by ``tests/serve.py`` for the test-only bounds the command line has no flag for
(a real subprocess: real signals, real sockets).
Arguments: ``HOST:PORT`` then ``--skills-dir DIR`` (repeatable), ``--no-auth``, ``--token-file F``,
``--allowed-host NAME``. The token may also come from ``MCP_HTTP_TOKEN``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--skills-dir", dest="skills_dirs", action="append", default=[])
    parser.add_argument("--no-auth", action="store_true")
    parser.add_argument("--token-file")
    parser.add_argument("--allowed-host", dest="allowed_hosts", action="append", default=[])
    parser.add_argument("--drain-seconds", type=float, default=None)
    # The server without its stop hooks: what the drain does with a call nothing else stops.
    parser.add_argument("--without-stop-hooks", action="store_true")
    args = parser.parse_args()

    from skill_mcp.config import load_settings
    from skill_mcp.errors import SkillMcpError
    from skill_mcp.server import serve_http
    from skill_mcp.surfaces.http.guard import parse_host_port

    settings = load_settings(args.skills_dirs, os.environ)
    token = os.environ.get("MCP_HTTP_TOKEN")
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    try:
        host, port = parse_host_port(args.address)
        bounds: dict[str, Any] = {"drain_seconds": args.drain_seconds} if args.drain_seconds is not None else {}
        if args.without_stop_hooks:
            from skill_mcp.server import build_server

            bounds["server_factory"] = build_server
        return serve_http(settings, host, port, token, args.no_auth, allowed_hosts=args.allowed_hosts, **bounds)
    except SkillMcpError as err:
        print(f"refused: {err.reason}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
