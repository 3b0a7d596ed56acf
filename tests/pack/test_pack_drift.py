"""The pack cannot drift from the code: every command, flag, variable, tool name, reason and
cross-reference it mentions must exist in this version of the product."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from mcp import Client

from skill_mcp.cli.main import build_parser
from skill_mcp.config import ENV_VARS
from skill_mcp.grantrules import FIXED_ENV
from skill_mcp.reasons import ExtensionRule, ProblemReason, Refusal
from tests.pack.extract import (
    REASONISH,
    TOOL,
    VARIABLE,
    Command,
    commands,
    inline_code,
    pack_text,
    skill_dirs,
    split_skill_md,
)
from tests.serve import stdio_params

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "src" / "skill_mcp" / "bundled"
TOOLS = {"skill_list", "skill_load", "skill_file", "skill_search", "skill_run"}

# Backticked hyphenated words that are neither reasons nor skill names, each with the file
# that defines it, so the allowlist itself cannot rot. None = defined outside this repository.
OTHER_TERMS: dict[str, str | None] = {
    "confirmation-required": "src/skill_mcp/runner/core.py",  # skill_run status
    "hosted-default": "src/skill_mcp/runner/grants.py",  # a grantFrom value
    "claude-code": "src/skill_mcp/bundled/print-client-config/scripts/print_config.js",
    "claude-desktop": "src/skill_mcp/bundled/print-client-config/scripts/print_config.js",
    "parse-error": "src/skill_mcp/bundled/check-stdout-purity/scripts/check_stdout.py",
    "stdout-lines": "src/skill_mcp/bundled/check-stdout-purity/scripts/check_stdout.py",
    "still-serving": "src/skill_mcp/bundled/check-stdout-purity/scripts/check_stdout.py",
    "skill-mcp": "pyproject.toml",  # the program's name
    "tools-call-simple-text": None,  # a scenario of @modelcontextprotocol/conformance
    "wire-schema-valid": None,  # a check of @modelcontextprotocol/conformance
}


def _all_commands() -> list[Command]:
    return [c for d in skill_dirs() for c in commands(d)]


def _parse(argv: tuple[str, ...]) -> str | None:
    """None when the real parser accepts ``argv``; argparse's complaint otherwise."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(list(argv))
    except SystemExit as exc:
        if exc.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1]
    return None


def test_the_extractor_finds_the_commands_the_pack_is_made_of() -> None:
    found = _all_commands()
    subcommands = {c.argv[0] for c in found if c.argv}
    assert len(found) >= 60
    assert subcommands >= {"serve", "tools", "index", "list", "search", "show", "call", "validate", "pack"}


# Long flags of other programs the pack mentions on their own, by program.
OTHER_FLAGS = {
    "docker run": {"--cap-add", "--cap-drop", "--read-only", "--rm", "--security-opt", "--tmpfs"},
    "claude mcp add": {"--scope"},
    "goose session": {"--with-extension"},
    "@modelcontextprotocol/conformance server": {"--spec-version"},
}


def _all_cli_options() -> set[str]:
    """Every option string of every skill-mcp subcommand (and sub-subcommand)."""
    found: set[str] = set()

    def walk(parser: object) -> None:
        for action in parser._actions:  # type: ignore[attr-defined]
            found.update(o for o in action.option_strings if o.startswith("--"))
            choices = getattr(action, "choices", None)
            for sub in choices.values() if isinstance(choices, dict) else ():
                if hasattr(sub, "_actions"):
                    walk(sub)

    walk(build_parser())
    return found


def _script_options() -> set[str]:
    """The flags the bundled scripts parse, read from their sources."""
    found: set[str] = set()
    for path in BUNDLED.glob("*/scripts/*"):
        if not path.is_file():  # a ``__pycache__`` left by running a script by hand
            continue
        found.update(re.findall(r"""['"](--[a-z][a-z-]*)['"]""", path.read_text(encoding="utf-8")))
    return found


def test_every_flag_the_pack_mentions_on_its_own_exists_somewhere() -> None:
    known = _all_cli_options() | _script_options() | set().union(*OTHER_FLAGS.values())
    mentioned = set()
    for d in skill_dirs():
        _, body = split_skill_md((d / "SKILL.md").read_text(encoding="utf-8"))
        for span in inline_code(body):
            word = span.split()[0]
            if re.fullmatch(r"--[a-z][a-z-]*", word):
                mentioned.add((d.name, word))
    assert len(mentioned) >= 20
    assert sorted((s, f) for s, f in mentioned if f not in known) == []


def test_the_flag_check_knows_the_real_options() -> None:  # positive and negative control
    options = _all_cli_options()
    assert {"--skills-dir", "--watch", "--phase", "--strict", "--check", "--args", "--json"} <= options
    assert "--no-such-flag" not in options
    assert {"--client", "--home", "--timeout"} <= _script_options()


def _serve_options() -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")  # the subcommand table
    return {o for action in sub.choices["serve"]._actions for o in action.option_strings}  # type: ignore[index]  # choices of a sub-parsers action: a dict


@pytest.mark.xfail(
    "--allowed-host" not in _serve_options(),
    strict=True,
    reason="the pack's skills name `serve --allowed-host`, which the CLI does not have yet",
)
def test_every_skill_mcp_command_line_in_the_pack_parses_with_the_real_cli() -> None:
    bad = [(c.skill, " ".join(c.argv), why) for c in _all_commands() if (why := _parse(c.argv))]
    assert not bad, "\n".join(f"{s}: skill-mcp {a}  ->  {w}" for s, a, w in bad)


def test_the_command_check_rejects_a_flag_that_does_not_exist() -> None:  # negative control
    assert _parse(("serve", "--skills-dir", "x")) is None
    assert _parse(("serve", "--no-such-flag")) is not None
    assert _parse(("pack", "lock", "--no-such-flag")) is not None


def test_every_variable_the_pack_names_is_a_documented_variable() -> None:
    named = {m for text in pack_text().values() for m in VARIABLE.findall(text)}
    assert "MCP_SKILL_RUN" in named and "SKILLS_DIR" in named
    # The server reads ENV_VARS; it sets FIXED_ENV (SKILL_OUTPUT_DIR among them) for each script.
    assert sorted(named - set(ENV_VARS) - set(FIXED_ENV)) == []


def test_every_tool_name_the_pack_names_is_one_of_the_five_tools() -> None:
    named = {m for text in pack_text().values() for m in TOOL.findall(text)}
    # skill_mcp is the appliance's nftables table, not a tool.
    assert "table inet skill_mcp" in (REPO / "nftables" / "skill-mcp.nft").read_text(encoding="utf-8")
    assert named - {"skill_mcp"} == TOOLS


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_real_server_registers_every_tool_the_pack_names() -> None:
    params = stdio_params()
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        registered = {tool.name for tool in (await client.list_tools()).tools}
    assert registered == TOOLS


def test_every_reason_shaped_term_is_a_reason_a_skill_or_a_known_term() -> None:
    reasons = {str(r) for r in ProblemReason} | {str(r) for r in Refusal} | {str(r) for r in ExtensionRule}
    names = {d.name for d in skill_dirs()}
    unknown = set()
    for d in skill_dirs():
        _, body = split_skill_md((d / "SKILL.md").read_text(encoding="utf-8"))
        for span in inline_code(body):
            if REASONISH.match(span) and span not in reasons | names | set(OTHER_TERMS):
                unknown.add((d.name, span))
    assert sorted(unknown) == []


@pytest.mark.parametrize("term", sorted(t for t, f in OTHER_TERMS.items() if f))
def test_each_allowlisted_term_is_defined_where_the_allowlist_says(term: str) -> None:
    assert term in (REPO / str(OTHER_TERMS[term])).read_text(encoding="utf-8")


def test_cross_references_name_skills_that_exist() -> None:
    names = {d.name for d in skill_dirs()}
    pattern = re.compile(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`")
    refs = set()
    for d in skill_dirs():
        _, body = split_skill_md((d / "SKILL.md").read_text(encoding="utf-8"))
        for ref in pattern.findall(body):
            if re.search(
                r"\bsee `" + re.escape(ref) + "`|skill `" + re.escape(ref) + "`|`" + re.escape(ref) + r"` skill", body
            ):
                refs.add((d.name, ref))
    assert refs, "the pack should point readers at related skills"
    assert sorted((s, r) for s, r in refs if r not in names) == []
