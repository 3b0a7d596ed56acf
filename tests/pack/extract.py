"""Read the bundled pack as text and pull out what it claims exists in the product.

Every claim the pack makes about the product's surface is extracted here, so a test can hold
it against the code: ``skill-mcp`` command lines (inline code, shell blocks, and client
configuration snippets in JSON, TOML and YAML), environment variables, tool names, reasons
and cross-references between skills.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from skill_mcp.config import BUNDLED_ROOT

PHASES = ("wire", "design", "invoke", "verify", "govern", "publish", "deploy")
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^(\s*)```([A-Za-z0-9_+-]*)\s*$")
_INLINE = re.compile(r"`([^`\n]+)`")
VARIABLE = re.compile(r"\b(?:MCP|SKILLS?)_[A-Z0-9_]*[A-Z0-9]\b")
TOOL = re.compile(r"\bskill_[a-z]+\b")
# A backticked token shaped like a reason: lowercase words joined by hyphens, or the
# upper-case token reasons (DRAFT_CHANGED, TOKEN_*).
REASONISH = re.compile(r"^(?:[a-z]+(?:-[a-z]+)+|(?:DRAFT|TOKEN)_[A-Z]+)$")


@dataclass(frozen=True, slots=True)
class Command:
    skill: str
    argv: tuple[str, ...]  # the words after ``skill-mcp``
    source: str  # the text it came from, for failure messages


def skill_dirs(root: Path = BUNDLED_ROOT) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "SKILL.md").is_file())


def split_skill_md(text: str) -> tuple[dict[str, Any], str]:
    """Frontmatter (parsed with PyYAML's safe loader, enough for this pack) and body."""
    lines = text.splitlines(keepends=True)
    assert lines[0].rstrip() == "---"
    end = next(i for i in range(1, len(lines)) if lines[i].rstrip() == "---")
    return yaml.safe_load("".join(lines[1:end])), "".join(lines[end + 1 :])


def code_blocks(body: str) -> Iterator[tuple[str, str]]:
    """(language, text) for each fenced block; indentation of list items removed."""
    lang: str | None = None
    indent = ""
    buf: list[str] = []
    for line in body.splitlines():
        match = _FENCE.match(line)
        if match and lang is None:
            lang, indent, buf = match.group(2).lower(), match.group(1), []
        elif match and lang is not None:
            yield lang, "\n".join(buf)
            lang = None
        elif lang is not None:
            buf.append(line[len(indent) :] if line.startswith(indent) else line)


def prose(body: str) -> str:
    """The body without its fenced blocks."""
    out, inside = [], False
    for line in body.splitlines():
        if _FENCE.match(line):
            inside = not inside
        elif not inside:
            out.append(line)
    return "\n".join(out)


def inline_code(body: str) -> list[str]:
    # Inline spans may wrap across a line break inside a list item; join wrapped lines first.
    return _INLINE.findall(re.sub(r"\n[ \t]+", " ", prose(body)))


def _is_program(word: str) -> bool:
    return word.rsplit("/", 1)[-1] == "skill-mcp"


def _commands_in_words(words: list[str]) -> Iterator[tuple[str, ...]]:
    """The ``skill-mcp ...`` commands inside one shell command's words.

    ``skill-mcp`` counts as the program when it is the first word, when it follows ``--``
    (``claude mcp add NAME -- skill-mcp serve``), or when a whole command is quoted as one
    argument (``--with-extension "skill-mcp serve"``). Elsewhere it is some other tool's
    argument (a secret's name, or a launcher whose own flags follow the server command, as
    the MCP Inspector's do) and is not checked.
    """
    for i, word in enumerate(words):
        if _is_program(word) and (i == 0 or words[i - 1] == "--"):
            yield tuple(words[i + 1 :])
            return
        if word.startswith("skill-mcp "):
            yield tuple(shlex.split(word)[1:])


def shell_commands(text: str) -> Iterator[tuple[str, ...]]:
    text = re.sub(r"\\\n\s*", " ", text)
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "skill-mcp" not in line:
            continue
        try:
            lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
            lex.whitespace_split = True
            lex.commenters = "#"
            tokens = list(lex)
        except ValueError:
            raise AssertionError(f"cannot split the shell line {line!r}") from None
        words: list[str] = []
        for token in [*tokens, ";"]:
            if token and set(token) <= set(";&|<>"):
                yield from _commands_in_words([w for w in words if not re.match(r"^[A-Z_][A-Z0-9_]*=", w)])
                words = []
            else:
                words.append(token)


def config_commands(value: Any) -> Iterator[tuple[str, ...]]:
    """``skill-mcp`` commands inside a parsed client configuration (any shape)."""
    if isinstance(value, dict):
        program = value.get("command", value.get("cmd"))
        args = value.get("args", [])
        if isinstance(program, str) and _is_program(program) and isinstance(args, list):
            yield tuple(str(a) for a in args)
        for item in value.values():
            yield from config_commands(item)
    elif isinstance(value, list):
        words = [str(v) for v in value if isinstance(v, str | int)]
        if len(words) == len(value):
            for i, word in enumerate(words):
                if _is_program(word):
                    yield tuple(words[i + 1 :])
                    break
        for item in value:
            yield from config_commands(item)


def parse_block(lang: str, text: str) -> Any:
    """Parse a configuration block; a block that claims a format must be valid in it."""
    if lang == "json":
        return json.loads(text)
    if lang == "toml":
        return tomllib.loads(text)
    if lang == "yaml":
        return list(yaml.safe_load_all(text))
    return None


def commands(skill_dir: Path) -> Iterator[Command]:
    _, body = split_skill_md((skill_dir / "SKILL.md").read_text(encoding="utf-8"))
    name = skill_dir.name
    for span in inline_code(body):
        for argv in shell_commands(span):
            yield Command(name, argv, span)
    for lang, text in code_blocks(body):
        if lang in SHELL_LANGS:
            for argv in shell_commands(text):
                yield Command(name, argv, text)
        elif lang in ("json", "toml", "yaml"):
            for argv in config_commands(parse_block(lang, text)):
                yield Command(name, argv, text)


def pack_text(root: Path = BUNDLED_ROOT) -> dict[Path, str]:
    """Every text file of the pack, by path."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            out[path] = path.read_text(encoding="utf-8")
    return out
