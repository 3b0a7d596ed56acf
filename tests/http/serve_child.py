"""Start the real server over Streamable HTTP, as ``skill-mcp serve --http`` would.

Run as a script by ``tests/http/harness.py`` (a real subprocess: real signals, real sockets).
Arguments: ``HOST:PORT`` then ``--skills-dir DIR`` (repeatable), ``--no-auth``, ``--token-file F``,
``--allowed-host NAME``. The token may also come from ``MCP_HTTP_TOKEN``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--skills-dir", dest="skills_dirs", action="append", default=[])
    parser.add_argument("--no-auth", action="store_true")
    parser.add_argument("--token-file")
    parser.add_argument("--allowed-host", dest="allowed_hosts", action="append", default=[])
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")

    from skill_mcp.config import load_settings
    from skill_mcp.errors import SkillMcpError
    from skill_mcp.surfaces.http import parse_host_port, serve_http

    settings = load_settings(args.skills_dirs, os.environ)
    token = os.environ.get("MCP_HTTP_TOKEN")
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    try:
        host, port = parse_host_port(args.address)
        return serve_http(settings, host, port, token, args.no_auth, allowed_hosts=args.allowed_hosts,
                          server_factory=_factory())
    except SkillMcpError as err:
        print(f"refused: {err.reason}", file=sys.stderr)
        return 3


def _factory():  # type: ignore[no-untyped-def]
    """The server stdio serves. Until ``skill_mcp.server.build_server`` lands, assemble it here
    exactly as that module will (catalog + surfaces.app.assemble)."""
    try:
        from skill_mcp.server import build_server

        return build_server
    except ImportError:
        from skill_mcp.catalog import build_catalog
        from skill_mcp.surfaces.app import assemble

        def build(settings):  # type: ignore[no-untyped-def]
            catalog = build_catalog(settings)
            return assemble(settings, lambda: catalog)

        return build


if __name__ == "__main__":
    sys.exit(main())
