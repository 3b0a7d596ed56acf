"""docs/ must stay true: every reason and every environment variable is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from skill_mcp.config import ENV_VARS
from skill_mcp.reasons import ExtensionRule, ProblemReason, Refusal

DOCS = Path(__file__).resolve().parent.parent / "docs"


def documented_codes(name: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", (DOCS / name).read_text(encoding="utf-8")))


@pytest.mark.parametrize("reason", [*ProblemReason, *Refusal], ids=str)
def test_every_reason_is_documented(reason: ProblemReason | Refusal) -> None:
    assert reason.value in documented_codes("reasons.md"), f"docs/reasons.md does not list {reason.value}"


@pytest.mark.parametrize("rule", list(ExtensionRule), ids=str)
def test_every_rule_that_keeps_a_skill_out_of_the_extension_is_documented(rule: ExtensionRule) -> None:
    table = (DOCS / "reasons.md").read_text(encoding="utf-8").split("### Extension rules", 1)[1]
    assert f"| `{rule.value}` |" in table, f"docs/reasons.md's extension rules do not list {rule.value}"


@pytest.mark.parametrize("name", sorted(ENV_VARS))
def test_every_environment_variable_is_documented(name: str) -> None:
    assert name in documented_codes("configuration.md"), f"docs/configuration.md does not list {name}"


@pytest.mark.parametrize("name", sorted(ENV_VARS))
def test_every_environment_variable_is_in_the_readme(name: str) -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    assert f"`{name}`" in readme, f"README.md does not list {name}"


def _cli_words() -> set[str]:
    """Every subcommand and every option string the real parser accepts."""
    import argparse

    from skill_mcp.cli.main import build_parser

    words: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            words.update(s for s in action.option_strings if s.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    words.add(name)
                    walk(sub)

    walk(build_parser())
    return words - {"--help"}


@pytest.mark.parametrize("word", sorted(_cli_words()))
def test_every_cli_subcommand_and_flag_is_documented(word: str) -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text), f"docs/cli.md does not mention {word}"
