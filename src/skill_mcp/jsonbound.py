"""JSON decoding with the nesting bounded *before* the decoder runs.

The standard library's decoder recurses once per ``[`` or ``{``: a document nested a few
thousand deep raises ``RecursionError`` (not a ``ValueError``), and in the appliance's PID 1
an uncaught one ends the container. Every root-side decode of text another process wrote
(the server's broker frames, the declarations helper's document, the owner's
``MCP_SKILL_RUN``) goes through ``loads`` here, which measures the depth first with a linear
scan that does not recurse, and refuses anything deeper than ``MAX_DEPTH``.

How the depth is measured without recursion or a per-character Python loop: JSON strings
are removed (one regular expression, the string grammar of RFC 8259, so a bracket inside a
string never counts), everything but brackets is dropped, and each pass of
``str.replace("[]", "")`` removes exactly the innermost pairs, so a balanced text is empty
after ``limit`` passes if and only if it nests at most ``limit`` deep. Text the decoder would
refuse anyway (unbalanced brackets, an unterminated string) may be refused here as too deep;
text it accepts is measured exactly. A leaf: the standard library only.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64  # every document the project exchanges nests under 8; room to spare, far from recursion
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_CLOSE_AS_OPEN = str.maketrans("{}", "[]")


class TooDeep(ValueError):
    """The text nests deeper than the bound (a ``ValueError``, so callers that refuse bad JSON refuse it too)."""


def depth_within(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when ``text`` nests at most ``limit`` arrays/objects deep (``False`` also for unbalanced brackets)."""
    if text.count("[") + text.count("{") <= limit:
        return True  # the common case: no text with this few openers can nest deeper
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).translate(_CLOSE_AS_OPEN)
    run = "[" * (limit + 1)
    for _ in range(limit):
        if run in brackets:
            return False  # a run of limit+1 openers: too deep, whatever follows
        shorter = brackets.replace("[]", "")
        if len(shorter) == len(brackets):
            break
        brackets = shorter
    return not brackets


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """``json.loads`` for text nested at most ``limit`` deep; ``TooDeep`` (a ``ValueError``) otherwise.

    Bytes are decoded as UTF-8 first (``UnicodeDecodeError`` is a ``ValueError`` too).
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    if not depth_within(text, limit):
        raise TooDeep(f"the JSON text nests deeper than {limit} levels, or its brackets do not balance")
    return json.loads(text)
