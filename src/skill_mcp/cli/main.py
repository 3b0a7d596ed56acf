"""Argument parsing and dispatch for ``skill-mcp``. Each command lives in its own module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from skill_mcp import __version__
from skill_mcp.cli import exits
from skill_mcp.cli.output import fail


def _add_roots(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--skills-dir", "--packs-root", dest="skills_dirs", action="append", default=[], metavar="DIR",
        help="a skill root (repeatable); default: SKILLS_DIR, then MCP_SKILLS_PATH, then the bundled pack",
    )


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skill-mcp",
        description="An MCP server for a directory of Agent Skills, and the tools around it.",
        epilog="Exit codes: 0 ok, 1 problem found, 2 usage error, 3 could not start. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"skill-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("serve", help="serve the skills over stdio (JSON-RPC on stdin/stdout)")
    _add_roots(p)
    p.add_argument("--watch", action="store_true", help="rebuild the catalog when files change")
    p.set_defaults(run="skill_mcp.cli.serve:run")
    return parser


def _dispatch(target: str, args: argparse.Namespace) -> int:
    import importlib

    module_name, _, func = target.partition(":")
    module = importlib.import_module(module_name)
    return int(getattr(module, func)(args))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return exits.USAGE
    try:
        return _dispatch(args.run, args)
    except KeyboardInterrupt:
        return exits.INTERRUPTED
    except BrokenPipeError:
        return exits.OK
    except exits.CliError as err:
        return fail(err.code, err.message, json_mode=getattr(args, "json", False), reason=err.reason)
