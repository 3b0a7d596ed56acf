"""The common frontmatter shape read without composing a node tree.

Most frontmatters are a block mapping of ``key: value`` lines, nested by indentation, whose
values are one-line plain scalars or one-line quoted strings without escapes. ``read`` reads
exactly that subset, line by line, and gives up (None) on anything else: a sequence, a flow
collection, a comment, a multi-line or empty value, a key that is not a plain word, an
indicator or a character libyaml might treat otherwise, a tab, an indentation that is not a
clean nesting, a duplicate key. Plain scalars are resolved by the same core-schema resolver and
built by the same constructor (``yaml12``) as the libyaml path, so a text read here has the
value that path gives it (a differential property holds the two equal). ``yaml12.load_composed``
tries it first, only on text libyaml would read (``_c_safe``, no ``&`` or ``*``).

The reading keeps the plain scalars it met (``Read.plain``): the YAML 1.1 check
(``yaml11.differences_composed``) needs no tree when all of them read alike in both versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from skill_mcp.limits import YAML_DEPTH_MAX, YAML_VALUES_MAX

# Characters outside these make libyaml refuse or read specially (controls, tabs, CR, BOM, the
# surrogates, U+2028 and U+2029, which libyaml takes for line breaks); the subset leaves such
# text to it.
_OTHER_CHARS = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
# One line: indentation, a plain word key, then nothing (a nested mapping follows), a quoted
# string without escapes (its closing quote ends the line, blanks aside), or the rest.
_LINE = re.compile(r"""( *)([A-Za-z][A-Za-z0-9_-]*):(?:$| +(?:"([^"\\]*)" *$|'([^']*)' *$|(.*)))""")
# A value's first character may not be an indicator (c-indicator) nor a blank.
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@` ")
_STR = "tag:yaml.org,2002:str"
_MEMO_MAX = 4096
_MEMO_CHARS = 64
_built: dict[str, Any] = {}  # plain scalar text -> its value (immutable: str, int, float, bool, None)


@dataclass(frozen=True, slots=True)
class Read:
    value: dict[str, Any]
    plain: list[str]  # every plain scalar, keys included, as written


def read(text: str, resolve: Any, build: Any) -> Read | None:
    """The mapping ``text`` holds when it is in the subset, else None. ``resolve(value)`` gives a
    plain scalar's core-schema tag, ``build(tag, value)`` its value."""
    if " #" in text or "\t" in text or _OTHER_CHARS.search(text):
        return None
    # Past the bounds every reader holds a document to (``limits``): each line holds at most one
    # key and its value, so a text of fewer lines cannot pass YAML_VALUES_MAX; a longer one is
    # left to libyaml, which counts (the nesting below is checked as it opens).
    if 2 * text.count("\n") + 3 > YAML_VALUES_MAX:
        return None
    plain: list[str] = []
    root: dict[Any, Any] = {}
    # (indent of this mapping's keys, the mapping); the innermost last.
    stack: list[tuple[int, dict[Any, Any]]] = [(0, root)]
    level, mapping = 0, root
    pending: Any = None
    opened = False  # the previous line was a key with no value: a nested mapping must follow
    match_line = _LINE.match
    for line in text.split("\n"):
        match = match_line(line)
        if match is None:
            if line.strip(" "):
                return None
            continue  # a blank line
        indent = match.end(1)
        if opened:
            if indent <= level:
                return None  # an empty value: not in the subset
            child: dict[Any, Any] = {}
            mapping[pending] = child
            level, mapping = indent, child
            stack.append((level, mapping))
            if len(stack) >= YAML_DEPTH_MAX:  # its values would be one deeper than the mapping
                return None
            opened = False
        elif indent != level:
            while indent < stack[-1][0]:
                stack.pop()
            level, mapping = stack[-1]
            if indent != level:
                return None
        key_text, double, single, rest = match.group(2, 3, 4, 5)
        plain.append(key_text)
        key = _plain(key_text, resolve, build)
        if key in mapping:
            return None
        if double is not None or single is not None:
            mapping[key] = build(_STR, double if double is not None else single)
            continue
        if not rest:
            pending = key
            mapping[key] = None  # held in place, so the keys keep their order
            opened = True
            continue
        if rest[0] in _INDICATORS:
            return None
        value = rest.rstrip(" ")
        if ": " in value or value[-1] == ":":
            return None
        plain.append(value)
        mapping[key] = _plain(value, resolve, build)
    if opened or not root:
        return None
    return Read(root, plain)


def _plain(value: str, resolve: Any, build: Any) -> Any:
    try:
        return _built[value]
    except KeyError:
        built = build(resolve(value), value)
        if len(value) <= _MEMO_CHARS and len(_built) < _MEMO_MAX:
            _built[value] = built
        return built
