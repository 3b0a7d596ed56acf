"""Markdown sections of a SKILL.md body: its headings, and the text under each.

``split_markdown`` is the definition (one step per line); ``split_sections`` gives the same
headings and the same words per section without a Python step per line, for the index build.
"""

from __future__ import annotations

import re
from collections.abc import Iterator


def split_markdown(body: str) -> tuple[list[str], list[str]]:
    """Headings of a Markdown body, and the text of each section.

    ``sections[0]`` is the text before the first heading; ``sections[i + 1]`` the text under
    ``headings[i]``. Lines inside fenced code blocks are text, never headings (``# comment``
    in a shell block).
    """
    headings: list[str] = []
    sections: list[list[str]] = [[]]
    fence: str | None = None
    for line in body.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
        elif fence is None and stripped.startswith("#"):
            level = len(stripped) - len(stripped.lstrip("#"))
            title = stripped.lstrip("#").strip()
            if title and level <= 6:
                headings.append(title[:120])
                sections.append([])
                continue
        sections[-1].append(line)
    return headings, ["\n".join(lines) for lines in sections]


# Lines that may start a heading or a code fence. The fast splitter below only applies where
# "\n" is the only line break and lstrip() can only strip " ", "\t" and "\x1f" (ASCII text
# without the other characters str.splitlines() breaks on); other text takes the exact path.
# Matched from each "\n" (a literal first character: the regex engine skips to it fast), and
# once at the start of the body.
_CANDIDATE = re.compile(r"\n[ \t\x1f]*(?=#|```|~~~)")
_FIRST_CANDIDATE = re.compile(r"[ \t\x1f]*(?=#|```|~~~)")
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def split_sections(body: str) -> tuple[list[str], list[str]]:
    """``split_markdown`` (same headings, same words per section), without a Python step per line."""
    if not body.isascii() or any(c in body for c in _OTHER_BREAKS):
        return split_markdown(body)
    headings: list[str] = []
    sections: list[str] = []
    fence: str | None = None
    start = 0  # where the current section's text begins
    for line, at in _candidates(body):
        end = body.find("\n", at)
        end = len(body) if end < 0 else end
        stripped = body[at:end]
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
        elif fence is None:
            level = len(stripped) - len(stripped.lstrip("#"))
            title = stripped.lstrip("#").strip()
            if title and level <= 6:
                headings.append(title[:120])
                sections.append(body[start:line])
                start = end
    sections.append(body[start:])
    return headings, sections


def _candidates(body: str) -> Iterator[tuple[int, int]]:
    """(start of the line, start of its text after indentation) of each candidate line."""
    if (m := _FIRST_CANDIDATE.match(body)) is not None:
        yield 0, m.end()
    for m in _CANDIDATE.finditer(body):
        yield m.start() + 1, m.end()
