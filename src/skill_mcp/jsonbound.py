"""JSON decoding with the nesting bounded *before* the decoder runs.

The standard library's decoder recurses once per ``[`` or ``{``: a document nested a few
thousand deep raises ``RecursionError`` (not a ``ValueError``), and in the appliance's PID 1
an uncaught one ends the container. Every root-side decode of text another process wrote
(the server's broker frames, the declarations helper's document, the owner's
``MCP_SKILL_RUN``) goes through ``loads`` here, which measures the depth first with a linear
scan that does not recurse, and refuses anything deeper than ``MAX_DEPTH``.

How the depth is measured, without recursion and at C speed (no Python step per character):
strings are taken out first - escaped backslashes and escaped quotes removed (``bytes.replace``
pairs backslashes left to right, as JSON's lexer does), then the text split at the remaining
quotes and only the pieces outside strings kept - then every byte but the four brackets is
deleted and the rest mapped to +1/-1 (``bytes.translate``), and the running sum is followed
block by block (``bytes.count``), summed exactly (``itertools.accumulate``) only in a block that
could cross the bound. For text the decoder accepts, this is exactly its nesting; for text it
refuses, everything before the point where it stops is counted the same way, so it never
recurses past the bound either. A leaf: the standard library only.
"""

from __future__ import annotations

import json
from array import array
from itertools import accumulate
from typing import Any

MAX_DEPTH = 64  # every document the project exchanges nests under 8; room to spare, far from recursion
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_BLOCK = 64


class TooDeep(ValueError):
    """The text nests deeper than the bound (a ``ValueError``, so callers that refuse bad JSON refuse it too)."""


def _outside_strings(data: bytes) -> bytes:
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    if b'"' in data:
        data = b"".join(data.split(b'"')[::2])  # an unterminated last string is left out too
    return data


def depth_within(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """True when ``text`` nests at most ``limit`` arrays/objects deep (outside strings)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if data.count(b"[") + data.count(b"{") <= limit:
        return True  # the common case: no text with this few openers can nest deeper
    steps = _outside_strings(data).translate(_STEPS, _NOT_BRACKET)
    if b"\x01" * (limit + 1) in steps:
        return False  # a run of limit+1 openers: too deep, whatever came before
    depth = 0
    for at in range(0, len(steps), _BLOCK):
        block = steps[at : at + _BLOCK]
        opens = block.count(b"\x01")
        # Only a block that might cross the bound is followed step by step.
        if depth + opens > limit and depth + max(accumulate(array("b", block))) > limit:
            return False
        depth += 2 * opens - len(block)
    return True


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """``json.loads`` for text nested at most ``limit`` deep; ``TooDeep`` (a ``ValueError``) otherwise.

    Bytes are decoded as UTF-8 first (``UnicodeDecodeError`` is a ``ValueError`` too).
    """
    if not depth_within(text, limit):
        raise TooDeep(f"the JSON text nests deeper than {limit} levels")
    return json.loads(bytes(text).decode("utf-8") if isinstance(text, bytes | bytearray) else text)
