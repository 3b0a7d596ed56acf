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
    p.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP instead of stdio ([::1]:8080 for IPv6)")
    p.add_argument("--token-file", metavar="PATH", help="file holding the HTTP bearer token (else MCP_HTTP_TOKEN)")
    p.add_argument("--no-auth", action="store_true", help="HTTP without a bearer token (loopback only)")
    p.add_argument("--allowed-host", dest="allowed_hosts", action="append", default=[], metavar="NAME",
                   help="a Host header the HTTP transport accepts besides loopback (repeatable)")
    p.set_defaults(run="skill_mcp.cli.serve:run")

    p = sub.add_parser("tools", help="what the server advertises: tools, prompts, resources, extensions")
    _add_roots(p)
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.client_cmds:run_tools")

    p = sub.add_parser("index", help="the packs and skills the roots hold, with every problem")
    _add_roots(p)
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_index")

    p = sub.add_parser("list", help="the served skills, one a line")
    _add_roots(p)
    p.add_argument("--phase", metavar="P", help="only skills whose phase is P")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_list")

    p = sub.add_parser("search", help="rank the skills for a query")
    _add_roots(p)
    p.add_argument("query", metavar="QUERY", nargs="+", help="words, as a person would type them")
    p.add_argument("--limit", type=int, default=10, metavar="N", help="at most N hits (1-50, default 10)")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_search")

    p = sub.add_parser("show", help="one skill: its instructions and its file manifest")
    _add_roots(p)
    p.add_argument("name", metavar="NAME", help="the skill's (directory) name")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_show")

    p = sub.add_parser("call", help="call one tool through a real MCP client session")
    _add_roots(p)
    p.add_argument("tool", metavar="TOOL", help="the tool's name, as `skill-mcp tools` lists it")
    p.add_argument("--args", default="{}", metavar="JSON", help="the arguments, a JSON object (default {})")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.client_cmds:run_call")

    p = sub.add_parser("validate", help="report every problem of every skill; exit 1 on any error")
    p.add_argument("roots", metavar="ROOT", nargs="*", help="roots to check (default: as `serve` would)")
    p.add_argument("--strict", action="store_true", help="also apply the quality floors (docs/cli.md)")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.validate_cmd:run")

    p = sub.add_parser("pack", help="pack.json tools")
    pack_sub = p.add_subparsers(dest="pack_command", metavar="ACTION", required=True)
    q = pack_sub.add_parser("lock", help="write ROOT/pack.json pinning every file by SHA-256")
    q.add_argument("root", metavar="ROOT", help="the pack directory")
    q.add_argument("--name", help="the pack's name (default: kept from pack.json, else the directory name)")
    q.add_argument("--version", dest="pack_version", help="the pack's version (default: kept, else 0.1.0)")
    q.add_argument("--check", action="store_true", help="write nothing; exit 1 if pack.json is not up to date")
    _add_json(q)
    q.set_defaults(run="skill_mcp.cli.pack_cmd:run_lock")
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
