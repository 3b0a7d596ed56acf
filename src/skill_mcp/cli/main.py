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
from typing import TYPE_CHECKING, Any, NoReturn

from skill_mcp import __version__
from skill_mcp.cli import exits
from skill_mcp.cli.output import fail

if TYPE_CHECKING:  # pragma: no cover - typing only
    import argparse


ROOTS_HELP = "a skill root (repeatable); default: SKILLS_DIR, then MCP_SKILLS_PATH, then the bundled pack"
# Where a command's other positional (a query, a skill or tool name) sits beside roots, a root is
# told apart by its spelling: a path that starts with ``/``, ``./``, ``../`` or ``~`` (what a
# shell leaves of ``~/skills``), or ``.``/``..`` alone. Skill and tool names never start so.
_PATH_STARTS = ("/", "./", "../", "~")


def is_root_word(word: str) -> bool:
    """Whether a positional word of ``search``, ``show`` or ``call`` names a root."""
    return word in (".", "..") or word.startswith(_PATH_STARTS)


def _add_roots(p: argparse.ArgumentParser, *, positional: bool = True) -> None:
    if positional:
        p.add_argument("roots", metavar="ROOT", nargs="*", help=f"{ROOTS_HELP} (same as --skills-dir)")
    p.add_argument(
        "--skills-dir",
        "--packs-root",
        dest="skills_dirs",
        action="append",
        default=[],
        metavar="DIR",
        help=ROOTS_HELP,
    )


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")


def _serve(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    p.add_argument("--watch", action="store_true", help="rebuild the catalog when files change")
    p.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP instead of stdio ([::1]:8080 for IPv6)")
    p.add_argument("--token-file", metavar="PATH", help="file holding the HTTP bearer token (else MCP_HTTP_TOKEN)")
    p.add_argument("--no-auth", action="store_true", help="HTTP without a bearer token (loopback only)")
    p.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host header the HTTP transport accepts besides loopback (repeatable)",
    )
    p.add_argument(
        "--metrics",
        metavar="PATH|HOST:PORT",
        help="with --http: a Prometheus scrape endpoint, a path on the MCP port (needs the token) "
        "or its own address (else SKILL_MCP_METRICS; default none)",
    )
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
    _add_roots(p, positional=False)
    p.add_argument(
        "query",
        metavar="QUERY",
        nargs="+",
        help="words, as a person would type them; a word spelt as a path (/dir, ./dir, ~/dir) is a root",
    )
    p.add_argument("--limit", type=int, default=10, metavar="N", help="at most N hits (1-50, default 10)")
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_search")


def _show(p: argparse.ArgumentParser) -> None:
    _add_roots(p, positional=False)
    p.add_argument(
        "name",
        metavar="NAME",
        nargs="+",
        help="the skill's (directory) name; a word spelt as a path (/dir, ./dir, ~/dir) is a root",
    )
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.catalog_cmds:run_show")


def _call(p: argparse.ArgumentParser) -> None:
    _add_roots(p, positional=False)
    p.add_argument(
        "tool",
        metavar="TOOL",
        nargs="+",
        help="the tool's name, as `skill-mcp tools` lists it; a word spelt as a path (/dir, ./dir, ~/dir) is a root",
    )
    p.add_argument("--args", default="{}", metavar="JSON", help="the arguments, a JSON object (default {})")
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="confirm a skill_run without asking (scripts, CI); else asked on a terminal, declined without one",
    )
    p.add_argument(
        "--out", metavar="DIR", default=None, help="save the files a skill_run's script wrote (its outputs) into DIR"
    )
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.client_cmds:run_call")


def _validate(p: argparse.ArgumentParser) -> None:
    _add_roots(p)
    p.add_argument(
        "--strict",
        action="store_true",
        help="also apply the quality floors (a description that says when, steps, size, references, no credentials)",
    )
    _add_json(p)
    p.set_defaults(run="skill_mcp.cli.validate_cmd:run")


def _pack(p: argparse.ArgumentParser) -> None:
    pack_sub = p.add_subparsers(dest="pack_command", metavar="ACTION", required=True)
    q = pack_sub.add_parser("lock", help="write ROOT/pack.json pinning every file by SHA-256")
    q.add_argument("root", metavar="ROOT", nargs="?", help="the pack directory (or --skills-dir ROOT)")
    _add_roots(q, positional=False)
    q.add_argument("--name", help="the pack's name (default: kept from pack.json, else the directory name)")
    q.add_argument("--version", dest="pack_version", help="the pack's version (default: kept, else 0.1.0)")
    q.add_argument("--check", action="store_true", help="write nothing; exit 1 if pack.json is not up to date")
    _add_json(q)
    q.set_defaults(run="skill_mcp.cli.pack_cmd:run_lock")


def _completion(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to print a completion script for")
    p.set_defaults(run="skill_mcp.cli.completion:run")


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
    "completion": ("print a shell completion script (bash, zsh or fish)", _completion),
}


def _parser_class(json_errors: bool) -> type[argparse.ArgumentParser]:
    """argparse's parser, whose usage errors come as one JSON object on stderr under ``--json``."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            if not json_errors:
                super().error(message)
            fail(exits.USAGE, f"{self.prog}: {message}", json_mode=True, reason="usage")
            raise SystemExit(exits.USAGE)

    return Parser


def build_parser(only: str | None = None, *, json_errors: bool = False) -> argparse.ArgumentParser:
    """The whole parser; with ``only``, the same parser holding that one command.

    A line that starts with ``only`` parses to the same result, with the same errors and the
    same help, either way: argparse hands everything after the command name to that command's
    parser alone.
    """
    parser_class = _parser_class(json_errors)
    parser = parser_class(
        prog="skill-mcp",
        description="An MCP server for a directory of Agent Skills, and the tools around it.",
        epilog=(
            "Roots: positional (skill-mcp list ~/skills) or --skills-dir, alike for every command. "
            "Exit codes: 0 ok, 1 problem found, 2 usage error, 3 could not start, 130 interrupted. "
            "Run `skill-mcp COMMAND --help` for one command's arguments; "
            "`skill-mcp completion bash|zsh|fish` prints shell completion."
        ),
    )
    parser.add_argument("--version", action="version", version=f"skill-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=parser_class)
    for name, (help_line, add_arguments) in COMMANDS.items():
        if only is None or name == only:
            add_arguments(sub.add_parser(name, help=help_line, description=help_line))
    return parser


def command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of the command ``name`` inside ``parser`` (built by ``build_parser``)."""
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[name]
    return found


def _split_roots(words: list[str]) -> tuple[list[str], list[str]]:
    roots = [w for w in words if is_root_word(w)]
    return roots, [w for w in words if not is_root_word(w)]


def settle_roots(args: Any, usage_error: Callable[[str], None]) -> None:
    """One way to name roots for every command: positional roots join ``--skills-dir``.

    ``search``, ``show`` and ``call`` take their positional words together and keep as roots
    those spelt as paths (``is_root_word``); ``pack lock`` takes its one root either way.
    """
    command = getattr(args, "command", None)
    if command == "search":
        roots, args.query = _split_roots(args.query)
        if not args.query:
            usage_error("the following arguments are required: QUERY")
    elif command in ("show", "call"):
        field = "name" if command == "show" else "tool"
        roots, rest = _split_roots(getattr(args, field))
        if len(rest) != 1:
            usage_error(f"expected one {field.upper()} and roots spelt as paths (./dir, /dir, ~/dir), got {rest}")
        setattr(args, field, rest[0])
    elif command == "pack":
        given = ([args.root] if args.root else []) + list(args.skills_dirs)
        if len(given) != 1:
            usage_error("name the pack directory once: pack lock ROOT (or --skills-dir ROOT)")
        args.root = given[0]
        return
    else:
        roots = list(getattr(args, "roots", []))
    args.roots = roots
    args.skills_dirs = [*roots, *getattr(args, "skills_dirs", [])]


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
    return SimpleNamespace(
        command="serve",
        roots=[],
        skills_dirs=dirs,
        watch=watch,
        http=None,
        token_file=None,
        no_auth=False,
        allowed_hosts=[],
        metrics=None,
        run="skill_mcp.cli.serve:run",
    )


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
        only = line[0] if line and line[0] in COMMANDS else None
        parser = build_parser(only=only, json_errors="--json" in line)
        args, extra = parser.parse_known_args(line)
        if args.command is None:
            if extra:
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
            parser.print_help(sys.stderr)
            return exits.USAGE
        own = command_parser(parser, args.command)
        if args.command == "pack":
            own = command_parser(own, args.pack_command)
        if extra:
            # The command's own usage, not the top-level one (argparse's parse_args would use that).
            own.error(f"unrecognized arguments: {' '.join(extra)}")
        settle_roots(args, own.error)
    try:
        return _dispatch(args.run, args)
    except KeyboardInterrupt:
        return exits.INTERRUPTED
    except BrokenPipeError:
        return exits.OK
    except exits.CliError as err:
        return fail(err.code, err.message, json_mode=getattr(args, "json", False), reason=err.reason)
