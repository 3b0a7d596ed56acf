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


def _reason_spellings() -> dict[str, str]:
    """Each reason's value under a folded key (lower case, ``_`` as ``-``)."""
    return {r.value.lower().replace("_", "-"): r.value for r in (*ProblemReason, *Refusal)}


def _prose_files() -> list[Path]:
    root = DOCS.parent
    bundled = root / "src" / "skill_mcp" / "bundled"
    return [*sorted(DOCS.rglob("*.md")), root / "README.md", *sorted(bundled.rglob("SKILL.md"))]


# A reason written in code or quotes: `token-invalid`, "TOKEN_INVALID", 'not-granted'.
_QUOTED_WORD = re.compile(r"""[`"']([A-Za-z][A-Za-z0-9_-]*)[`"']""")


@pytest.mark.parametrize("path", _prose_files(), ids=lambda p: str(p.relative_to(DOCS.parent)))
def test_every_doc_spells_each_reason_exactly_as_the_server_sends_it(path: Path) -> None:
    # One convention (docs/reasons.md, "Spelling"): kebab-case, but the four confirmation-token
    # refusals in upper case. A client compares exact strings, so `token-invalid` in a doc sends
    # its reader after a value the server never sends.
    spellings = _reason_spellings()
    wrong = sorted(
        {
            f"{word} (the server sends {spellings[key]})"
            for word in _QUOTED_WORD.findall(path.read_text(encoding="utf-8"))
            if (key := word.lower().replace("_", "-")) in spellings and word != spellings[key]
        }
    )
    assert wrong == [], f"{path.name} misspells reasons"


def test_a_misspelled_reason_is_caught() -> None:
    spellings = _reason_spellings()
    words = _QUOTED_WORD.findall("redeemed by another (`token-invalid`); see `not_granted` and `TOKEN_REUSED`")
    assert [w for w in words if spellings.get(w.lower().replace("_", "-"), w) != w] == ["token-invalid", "not_granted"]
