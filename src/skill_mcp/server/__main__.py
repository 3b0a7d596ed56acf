"""``python -m skill_mcp.server [--skills-dir DIR ...] [--watch]``: ``skill-mcp serve`` over stdio."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from skill_mcp.config import load_settings
from skill_mcp.server.stdio import INTERRUPTED_EXIT, serve_stdio_early


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m skill_mcp.server", description="serve skills over stdio")
    parser.add_argument("--skills-dir", dest="skills_dirs", action="append", default=[], metavar="DIR")
    parser.add_argument("--watch", action="store_true", help="rebuild the catalog when files change")
    args = parser.parse_args(argv)
    settings = load_settings(args.skills_dirs, watch=args.watch)
    try:
        return serve_stdio_early(settings)
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
