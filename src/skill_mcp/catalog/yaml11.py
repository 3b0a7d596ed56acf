"""Where a host parsing frontmatter as YAML 1.1 would read another value than we publish.

The published frontmatter is the YAML 1.2 core-schema reading (``catalog.yaml12``), which is
what the format's YAML means. Many hosts parse with PyYAML's default loader (``yaml.safe_load``),
which resolves plain scalars by YAML 1.1: ``yes``/``on``/``no``/``off`` are booleans, ``2024-01-01``
is a date, ``1:30`` is the sexagesimal 90, ``017`` is octal 15, ``1_000`` is 1000, while
``0o17`` and ``1e3`` stay strings. Such a host compares its reading with the entry field by field
(the stable extension text requires it) and refuses the skill on any difference; FastMCP's
``read_skill()`` does exactly that. ``differences`` names every such field, so ``validate`` can
tell the author which value to quote, and the catalog can keep the skill out of the extension.

The comparison is strict about types (``True`` is not ``1``), pairs mapping entries by position
(both loaders keep the source order, and a key can itself read differently: ``on:``).

``differences`` parses the text again with PyYAML's safe loader: the reference.
``differences_composed`` reaches the same verdicts without that second parse. When libyaml
composed the YAML 1.2 reading of the very same text, a YAML 1.1 loader over libyaml
(``CSafeLoader``) sees the same events and composes the same node tree: only the tags of
plain scalars differ (both loaders give every quoted or block scalar, mapping and sequence
its default tag when the text writes no tag). So it re-resolves each plain scalar with
PyYAML's own YAML 1.1 resolver and builds it with PyYAML's own safe constructors. Whatever
that does not settle - a text that may write a tag, a merge key (``<<``), a scalar whose 1.1
tag has no plain constructor, a constructor that fails - goes to ``differences``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from skill_mcp.catalog.yaml_simple import Read


@dataclass(frozen=True, slots=True)
class Difference:
    """One frontmatter field that YAML 1.1 reads otherwise. ``field`` is a dotted path."""

    field: str
    yaml12: Any
    yaml11: Any
    key: bool = False  # the mapping key itself reads otherwise (``on:``)

    def advice(self) -> str:
        """How to write the value so that both readings agree."""
        if self.key:
            return f"quote the key ({json.dumps(self.yaml12)}:) so every host reads the text"
        if isinstance(self.yaml12, str):
            quoted = json.dumps(self.yaml12, ensure_ascii=False)
            return f"quote it ({self.field.rsplit('.', 1)[-1]}: {quoted}) so every host reads the text"
        if isinstance(self.yaml12, bool | int | float) or self.yaml12 is None:
            return f"write it as {json.dumps(self.yaml12)}, or quote it if you mean the text"
        return "quote the values inside it, or write them in a form both YAML versions read alike"


def _load11(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader: PyYAML's safe_load, through libyaml


def _walk(path: str, a: Any, b: Any, out: list[Difference]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if len(a) != len(b):
            out.append(Difference(path or "(frontmatter)", a, b))
            return
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            here = f"{path}.{ka}" if path else str(ka)
            if type(ka) is not type(kb) or ka != kb:
                out.append(Difference(here, ka, kb, key=True))
            else:
                _walk(here, va, vb, out)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (ia, ib) in enumerate(zip(a, b, strict=True)):
            _walk(f"{path}[{index}]", ia, ib, out)
        return
    if type(a) is not type(b) or a != b:
        out.append(Difference(path or "(frontmatter)", a, b))


def differences(text: str, published: Mapping[str, Any]) -> list[Difference]:
    """Every field of ``published`` (the YAML 1.2 reading of ``text``) that YAML 1.1 reads otherwise."""
    import yaml

    try:
        other = _load11(text)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        return [Difference("(frontmatter)", "parsed", f"not parsed: {str(exc).splitlines()[0]}")]
    if other is None:
        other = {}
    out: list[Difference] = []
    _walk("", dict(published), other, out)
    return out


# A tag is a node property: its '!' starts a token, so it follows a line start, a blank or an
# indicator, never a word character or another '!'. Text without such a '!' writes no tag.
_MAY_TAG = re.compile(r"(?<![\w!])!")
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
# The 1.1 tags of plain scalars built here; any other (merge, value, yaml) is ``_Undecided``.
_PLAIN_TAGS = ("null", "bool", "int", "float", "timestamp")


class _Undecided(Exception):
    """A node the one-parse reading does not build; the reference decides the skill."""


@cache
def _yaml11_tools() -> tuple[Any, Any, frozenset[str] | None, dict[str, Any]]:
    import yaml
    from yaml.resolver import Resolver

    resolver = Resolver()
    constructor = yaml.SafeLoader("")
    firsts = Resolver.yaml_implicit_resolvers
    # The first characters a 1.1 implicit resolver looks at; None when one looks at every value.
    first = None if None in firsts else frozenset(k for k in firsts if k)
    from skill_mcp.catalog.yaml12 import CoreLoader

    if first is not None and not set(CoreLoader.yaml_implicit_resolvers) <= first:
        first = None  # a 1.2 resolver looks at a character 1.1 does not: resolve every scalar
    constructors = {
        f"tag:yaml.org,2002:{name}": constructor.yaml_constructors[f"tag:yaml.org,2002:{name}"] for name in _PLAIN_TAGS
    }
    return resolver, constructor, first, constructors


@cache
def _core_resolver() -> Any:
    from skill_mcp.catalog.yaml12 import CoreLoader

    return CoreLoader("")  # its resolver: the YAML 1.2 core schema's


def _read11(node: Any, tools: tuple[Any, Any, frozenset[str] | None, dict[str, Any]]) -> Any:
    """The value PyYAML's safe loader builds from ``node`` (composed from text writing no tag)."""
    value = node.value
    if isinstance(value, str):  # a scalar
        if node.style:  # quoted or block: a string in both versions
            return value
        resolver, constructor, first, constructors = tools
        if (value and first is not None and value[0] not in first) or _reads_alike(value):
            return value
        kind = type(node)
        tag = resolver.resolve(kind, value, (True, False))
        if tag == _STR:
            return value
        build = constructors.get(tag)
        if build is None:
            raise _Undecided(tag)
        return build(constructor, kind(tag, value))
    if value and isinstance(value[0], tuple):  # a mapping
        out: dict[Any, Any] = {}
        for key_node, value_node in value:
            key = _read11(key_node, tools)
            out[key] = _read11(value_node, tools)  # a later equal key wins, as in SafeConstructor
        return out
    if node.tag == _SEQ:
        return [_read11(child, tools) for child in value]
    if node.tag == _MAP:
        return {}
    raise _Undecided(node.tag)


_ALIKE_MEMO_MAX = 4096
_ALIKE_MEMO_CHARS = 64
_alike_memo: dict[str, bool] = {}


def _reads_alike(value: str) -> bool:
    """True when a plain scalar ``value`` is a string under YAML 1.1 and under 1.2 alike."""
    known = _alike_memo.get(value)
    if known is None:
        from yaml.nodes import ScalarNode

        resolver, _, _, _ = _yaml11_tools()
        known = (
            resolver.resolve(ScalarNode, value, (True, False)) == _STR
            and _core_resolver().resolve(ScalarNode, value, (True, False)) == _STR
        )
        if len(value) <= _ALIKE_MEMO_CHARS and len(_alike_memo) < _ALIKE_MEMO_MAX:
            _alike_memo[value] = known
    return known


def _inert(root: Any, first: frozenset[str] | None) -> bool:
    """True when every plain scalar under ``root`` is a string under YAML 1.1 and 1.2 alike, so
    the two readings of the tree are one. Most start with a character no 1.1 implicit resolver
    looks at (and every 1.2 resolver looks at a subset of those); the rest are resolved."""
    stack = [root]
    while stack:
        node = stack.pop()
        value = node.value
        if isinstance(value, str):
            if not node.style and (first is None or not value or value[0] in first) and not _reads_alike(value):
                return False
        elif value and isinstance(value[0], tuple):
            for key_node, value_node in value:
                stack.append(key_node)
                stack.append(value_node)
        else:
            stack.extend(value)
    return True


def differences_composed(text: str, published: Mapping[str, Any], composed: Any) -> list[Difference]:
    """``differences`` without its second parse. ``composed`` is the node tree libyaml composed
    from ``text`` for ``published`` (None when ``published`` was read otherwise, as when the
    mcp-host block was parsed on its own): then libyaml composes ``text`` once, building no
    value. ``differences`` itself decides whatever this does not settle."""
    if "!" not in text or not _MAY_TAG.search(text):  # the plain test first: most text has no '!'
        # Any failure falls through: the reference below words every failure.
        with contextlib.suppress(Exception):
            tree = composed
            if isinstance(tree, Read):
                # The common shape, read without a tree: its plain scalars are all it has that
                # the two versions could read otherwise.
                first = _yaml11_tools()[2]
                if all(
                    (value and first is not None and value[0] not in first) or _reads_alike(value)
                    for value in tree.plain
                ):
                    return []
                tree = composed = None
            if tree is None:
                from skill_mcp.catalog.yaml12 import compose

                tree = compose(text)
            if tree is not None:
                tools = _yaml11_tools()
                if composed is not None and _inert(composed, tools[2]):
                    return []  # every scalar reads alike: the 1.1 reading is ``published``, built from this tree
                other = _read11(tree, tools)
                out: list[Difference] = []
                _walk("", dict(published), {} if other is None else other, out)
                return out
    return differences(text, published)
