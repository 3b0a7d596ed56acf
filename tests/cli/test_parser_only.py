"""The cheap parsers of ``skill-mcp serve`` read every line exactly like the whole parser.

``main`` builds only the named command's parser (``build_parser(only=...)``) so that
``skill-mcp serve`` does not pay for every other command's arguments; these lines, good and
bad, must give the same namespace, the same exit and the same output either way. A plain
``serve`` line is read by ``serve_line`` without argparse; whatever it accepts must parse to
the same namespace through argparse, and whatever else it sees it must hand to argparse.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.cli.main import COMMANDS, build_parser, serve_line

LINES = [
    ["serve"],
    ["serve", "--skills-dir", "/a", "--packs-root", "/b", "--watch"],
    ["serve", "--http", "127.0.0.1:8080", "--token-file", "t", "--no-auth", "--allowed-host", "h"],
    ["serve", "--bogus"],
    ["serve", "--http"],
    ["serve", "--help"],
    ["serve", "--version"],
    ["tools", "--json"],
    ["index", "--skills-dir", "/a"],
    ["list", "--phase", "wire", "--json"],
    ["search"],
    ["search", "fill", "a", "form", "--limit", "x"],
    ["show", "alpha"],
    ["call", "skill_list", "--args", "{}"],
    ["validate", "--strict", "a", "b"],
    ["pack"],
    ["pack", "lock", "root", "--name", "n", "--version", "1.0.0", "--check", "--json"],
    ["completion", "bash"],
    ["list", "/a", "--bogus", "--json"],
]


def _parse(only: str | None, line: list[str]) -> tuple[Any, ...]:
    out, err = io.StringIO(), io.StringIO()
    namespace, code = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            namespace = vars(build_parser(only=only).parse_args(line))
        except SystemExit as exc:
            code = exc.code
    return namespace, code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("line", LINES, ids=" ".join)
def test_one_commands_parser_parses_its_lines_like_the_whole_parser(line: list[str]) -> None:
    assert _parse(line[0], line) == _parse(None, line)


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_every_command_is_in_the_table_and_the_whole_parser() -> None:  # the lines above cover them all
    assert {line[0] for line in LINES} == set(COMMANDS)
    assert _commands(build_parser()) == list(COMMANDS)


def test_the_one_command_parser_holds_only_that_command() -> None:
    assert _commands(build_parser(only="serve")) == ["serve"]


PLAIN_SERVE = [
    ["serve"],
    ["serve", "--watch"],
    ["serve", "--skills-dir", "/a"],
    ["serve", "--skills-dir", "/a", "--packs-root", "b c", "--watch", "--skills-dir", "/a"],
    ["serve", "--watch", "--watch", "--skills-dir", ""],
    ["serve", "--skills-dir", "serve"],
]
NOT_PLAIN = [
    [],
    ["tools"],
    ["--version"],
    ["serve", "--skills-dir"],  # argparse words the error
    ["serve", "--skills-dir", "-a"],  # a value that looks like an option: argparse's rules
    ["serve", "--skills-dir=/a"],
    ["serve", "--skills"],  # an abbreviation argparse accepts
    ["serve", "--http", "127.0.0.1:8080"],
    ["serve", "--help"],
    ["serve", "/a"],
    ["serve", "--", "--watch"],
]


@pytest.mark.parametrize("line", PLAIN_SERVE, ids=" ".join)
def test_a_plain_serve_line_reads_as_argparse_reads_it(line: list[str]) -> None:
    fast = serve_line(line)
    assert fast is not None
    assert vars(fast) == vars(build_parser().parse_args(line))


@pytest.mark.parametrize("line", NOT_PLAIN, ids=lambda line: " ".join(line) or "(empty)")
def test_any_other_line_goes_to_argparse(line: list[str]) -> None:
    assert serve_line(line) is None


WORDS = st.sampled_from(
    [
        "--skills-dir",
        "--packs-root",
        "--watch",
        "--watc",
        "--skills",
        "--http",
        "--no-auth",
        "-h",
        "--",
        "-",
        "-x",
        "",
        "/a",
        "a b",
        "serve",
        "--skills-dir=/b",
        "--help",
    ]
)


@given(st.lists(WORDS, max_size=8))
def test_serve_line_never_disagrees_with_argparse(words: list[str]) -> None:
    line = ["serve", *words]
    fast = serve_line(line)
    if fast is not None:
        assert vars(fast) == _parse(None, line)[0]
