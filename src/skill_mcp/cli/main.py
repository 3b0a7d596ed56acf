"""Argument parsing and dispatch for ``skill-mcp``. Each command lives in its own module.

When the line starts with a command name, only that command's parser is built:
``skill-mcp serve`` is started by a client for every session and should not pay for the other
commands' parsers (argparse builds a help formatter for every argument). Any other line
(``--help``, ``--version``, a mistyped command) gets the whole parser.

The line a client most often starts, ``serve`` with ``--skills-dir``/``--packs-root DIR`` and
``--watch``, is read by ``serve_line`` without importing argparse at all; every other line,
including every line with a mistake in it, goes to argparse, which therefore words every
error and every help text. ``tests/cli/test_parser_only.py`` holds ``serve_line`` equal to the
argparse parser on every line it accepts.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from skill_mcp import __version__
from skill_mcp.cli import exits
from skill_mcp.cli.output import fail

if TYPE_CHECKING:  # pragma: no cover - typing only
    import argparse


def _add_roots(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--skills-dir", "--packs-root", dest="skills_dirs", action="append", default=[], metavar="DIR",
        help="a skill root (repeatable); default: SKILLS_DIR, then MCP_SKILLS_PATH, then the bundled pack",
    )


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")


def _serve(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    p.add_argument("--watch", action="store_true", help="rebuild the catalog when files change")
    p.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP instead of stdio ([::1]:8080 for IPv6)")
    p.add_argument("--token-file", metavar="PATH", help="file holding the HTTP bearer token (else MCP_HTTP_TOKEN)")
    p.add_argument("--no-auth", action="store_true", help="HTTP without a bearer token (loopback only)")
    p.add_argument("--allowed-host", dest="allowed_hosts", action="append", default=[], metavar="NAME",
                   help="a Host header the HTTP transport accepts besides loopback (repeatable)")
    p.add_argument("--metrics", metavar="PATH|HOST:PORT",
                   help="with --http: a Prometheus scrape endpoint, a path on the MCP port (needs the token) "
                        "or its own address (else SKILL_MCP_METRICS; default none)")
    p.set_defaults(run="skill_mcp.cli.serve:run")


def _tools(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.client_cmds:run_tools")


def _index(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_index")


def _list(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    p.add_argument("--phase", metavar="P", help="only skills whose phase is P")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_list")


def _search(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    p.add_argument("query", metavar="QUERY", nargs="+", help="words, as a person would type them")
    p.add_argument("--limit", type=int, default=10, metavar="N", help="at most N hits (1-50, default 10)")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_search")


def _show(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    p.add_argument("name", metavar="NAME", help="the skill's (directory) name")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_show")


def _call(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    p.add_argument("tool", metavar="TOOL", help="the tool's name, as `skill-mcp tools` lists it")
    p.add_argument("--args", default="{}", metavar="JSON", help="the arguments, a JSON object (default {})")
    p.add_argument("--yes", "-y", action="store_true",
                   help="confirm a skill_run without asking (scripts, CI); else asked on a terminal, declined without one")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="save the files a skill_run's script wrote (its outputs) into DIR")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.client_cmds:run_call")


def _validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("roots", metavar="ROOT", nargs="*", help="roots to check (default: as `serve` would)")
    # The spelling every other catalog command takes, so `validate --skills-dir DIR` (typed the
    # way `list` was) checks DIR rather than failing on usage; roots given either way are checked.
    _add_roots(p)
    p.add_argument("--strict", action="store_true", help="also apply the quality floors (docs/cli.md)")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.validate_cmd:run")


def _pack(p: argparse.ArgumentParser) -> None:
    pack_sub = p.add_subparsers(dest="pack_command", metavar="ACTION", required=True)
    q = pack_sub.add_parser("lock", help="write ROOT/pack.json pinning every file by SHA-256")
    q.add_argument("root", metavar="ROOT", help="the pack directory")
    q.add_argument("--name", help="the pack's name (default: kept from pack.json, else the directory name)")
    q.add_argument("--version", dest="pack_version", help="the pack's version (default: kept, else 0.1.0)")
    q.add_argument("--check", action="store_true", help="write nothing; exit 1 if pack.json is not up to date")
    _add_json(q)
    q.set_defaults(run="skill_mcp.cli.pack_cmd:run_lock")


# name -> (help line, what adds its arguments), in the order `skill-mcp --help` lists them.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "serve": ("serve the skills over stdio (JSON-RPC on stdin/stdout)", _serve),
    "tools": ("what the server advertises: tools, prompts, resources, extensions", _tools),
    "index": ("the packs and skills the roots hold, with every problem", _index),
    "list": ("the served skills, one a line", _list),
    "search": ("rank the skills for a query", _search),
    "show": ("one skill: its instructions and its file manifest", _show),
    "call": ("call one tool through a real MCP client session", _call),
    "validate": ("report every problem of every skill; exit 1 on any error", _validate),
    "pack": ("pack.json tools", _pack),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``only``, the same parser holding that one command.

    A line that starts with ``only`` parses to the same result, with the same errors and the
    same help, either way: argparse hands everything after the command name to that command's
    parser alone.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="skill-mcp",
        description="An MCP server for a directory of Agent Skills, and the tools around it.",
        epilog="Exit codes: 0 ok, 1 problem found, 2 usage error, 3 could not start. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"skill-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_line, add_arguments) in COMMANDS.items():
        if only is None or name == only:
            add_arguments(sub.add_parser(name, help=help_line))
    return parser


# The one line ``serve_line`` reads: these options, nothing else, and no value that looks like
# an option (argparse has its own rules for those).
_SERVE_DIRS = ("--skills-dir", "--packs-root")
_SERVE_FLAGS = ("--watch",)


def serve_line(line: Sequence[str]) -> SimpleNamespace | None:
    """The namespace argparse would give for a plain ``serve`` line; None for any other line.

    Plain: ``serve`` followed only by ``--skills-dir DIR``, ``--packs-root DIR`` (DIR not
    starting with ``-``) and ``--watch``. The defaults are ``_serve``'s, repeated here and held
    equal to argparse's by the tests.
    """
    if not line or line[0] != "serve":
        return None
    dirs: list[str] = []
    watch = False
    i = 1
    while i < len(line):
        word = line[i]
        if word in _SERVE_FLAGS:
            watch = True
            i += 1
        elif word in _SERVE_DIRS and i + 1 < len(line) and not line[i + 1].startswith("-"):
            dirs.append(line[i + 1])
            i += 2
        else:
            return None
    return SimpleNamespace(command="serve", skills_dirs=dirs, watch=watch, http=None, token_file=None,
                           no_auth=False, allowed_hosts=[], metrics=None, run="skill_mcp.cli.serve:run")


def _dispatch(target: str, args: argparse.Namespace | SimpleNamespace) -> int:
    import importlib

    module_name, _, func = target.partition(":")
    module = importlib.import_module(module_name)
    return int(getattr(module, func)(args))


def main(argv: Sequence[str] | None = None) -> int:
    line = list(sys.argv[1:] if argv is None else argv)
    args: Any = serve_line(line)
    if args is None:
        # A line that starts with a command name is parsed by that command's parser alone.
        parser = build_parser(only=line[0] if line and line[0] in COMMANDS else None)
        args = parser.parse_args(line)
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
