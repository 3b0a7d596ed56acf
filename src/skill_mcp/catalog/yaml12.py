"""A PyYAML loader restricted to the YAML 1.2 core schema, with no anchors and no aliases.

PyYAML's ``SafeLoader`` resolves scalars by YAML 1.1 rules: ``no``/``on``/``yes`` become
booleans, ``017`` is octal, ``1:30`` is a sexagesimal int and dates become ``datetime``. The
core schema of YAML 1.2 (which the Agent Skills format assumes) recognises only
``null``, ``true``/``false``, decimal/``0o``/``0x`` ints and plain floats; everything else
is a string. This loader implements exactly that, and additionally refuses:

* anchors and aliases (a billion-laughs document cannot be written without them);
* duplicate mapping keys (a later key silently winning hides what the author meant);
* explicit tags outside the core schema (``!!binary``, ``!!python/...``, ``!!timestamp``).

Every refusal raises ``YamlError`` carrying a 1-based line and column.
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import BaseConstructor, ConstructorError
from yaml.events import AliasEvent, NodeEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from skill_mcp.catalog import yaml_simple
from skill_mcp.limits import YAML_DEPTH_MAX, YAML_VALUES_MAX


class YamlError(ValueError):
    """The document is not YAML 1.2 core we accept. ``line``/``column`` are 1-based."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(message + where)
        self.message = message
        self.line = line
        self.column = column


def _mark(node_or_event: Any) -> tuple[int | None, int | None]:
    mark = getattr(node_or_event, "start_mark", None)
    if mark is None:
        return None, None
    return mark.line + 1, mark.column + 1


_INTERN_MAX = 40


class _CoreResolver(BaseResolver):
    pass


_CORE_RESOLVERS: list[tuple[str, str, str]] = [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", "~nN"),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?(?:\.inf|\.Inf|\.INF)|\.nan|\.NaN|\.NAN)$",
        "-+.0123456789",
    ),
]
for _tag, _pattern, _first in _CORE_RESOLVERS:
    _CoreResolver.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


class _CoreConstructor(BaseConstructor):
    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise YamlError("expected a mapping", *_mark(node))
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise YamlError("a mapping key must be a scalar", *_mark(key_node)) from None
            if key in result:
                raise YamlError(f"duplicate key {key!r}", *_mark(key_node))
            result[key] = self.construct_object(value_node, deep=deep)
        return result

    def construct_core_map(self, node: Node) -> Any:
        data: dict[Any, Any] = {}
        yield data
        data.update(self.construct_mapping(node, deep=True))

    def construct_core_seq(self, node: Node) -> Any:
        data: list[Any] = []
        yield data
        if not isinstance(node, SequenceNode):
            raise YamlError("expected a sequence", *_mark(node))
        data.extend(self.construct_object(child, deep=True) for child in node.value)

    def construct_core_str(self, node: Node) -> str:
        if not isinstance(node, ScalarNode):
            raise YamlError("expected a scalar", *_mark(node))
        value = str(node.value)
        # Keys and short values repeat across thousands of skills (name, description, MIT):
        # one shared copy each keeps a 10,000-skill catalog several MiB smaller.
        return sys.intern(value) if len(value) <= _INTERN_MAX else value

    def construct_core_null(self, node: Node) -> None:
        return None

    def construct_core_bool(self, node: Node) -> bool:
        return str(node.value).lower() == "true"

    def construct_core_int(self, node: Node) -> int:
        text = str(node.value)
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)

    def construct_core_float(self, node: Node) -> float:
        text = str(node.value).lower()
        if text.endswith("inf"):
            return -math.inf if text.startswith("-") else math.inf
        if text == ".nan":
            return math.nan
        return float(text)

    def construct_undefined(self, node: Node) -> Any:
        raise YamlError(f"the tag {node.tag!r} is outside the YAML 1.2 core schema", *_mark(node))


# Only the core schema's tags: the YAML 1.1 constructors of SafeConstructor (timestamps,
# binary, sets, merge keys) are deliberately not inherited.
_CORE_CONSTRUCTORS: dict[str | None, Any] = {
    "tag:yaml.org,2002:map": _CoreConstructor.construct_core_map,
    "tag:yaml.org,2002:seq": _CoreConstructor.construct_core_seq,
    "tag:yaml.org,2002:str": _CoreConstructor.construct_core_str,
    "tag:yaml.org,2002:null": _CoreConstructor.construct_core_null,
    "tag:yaml.org,2002:bool": _CoreConstructor.construct_core_bool,
    "tag:yaml.org,2002:int": _CoreConstructor.construct_core_int,
    "tag:yaml.org,2002:float": _CoreConstructor.construct_core_float,
    None: _CoreConstructor.construct_undefined,
}
for _core_tag, _constructor in _CORE_CONSTRUCTORS.items():
    _CoreConstructor.add_constructor(_core_tag, _constructor)


# Every reader refuses a document past these (``limits``): the pure loader as it composes, the
# libyaml path by handing the document to it (``_fast``), the line reader by giving it up.
VALUES_MAX = YAML_VALUES_MAX
DEPTH_MAX = YAML_DEPTH_MAX
TOO_MANY = f"more than {VALUES_MAX} values (each key, value and item counts one)"
TOO_DEEP = f"nested more than {DEPTH_MAX} levels deep"


class _NoAliasComposer(Composer):
    def __init__(self) -> None:
        super().__init__()
        self._values = 0
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]
        if isinstance(event, AliasEvent):
            raise YamlError("aliases are refused", *_mark(event))
        if isinstance(event, NodeEvent) and event.anchor is not None:
            raise YamlError("anchors are refused", *_mark(event))
        self._values += 1
        if self._values > VALUES_MAX:
            raise YamlError(TOO_MANY, *_mark(event))
        if self._depth >= DEPTH_MAX:
            raise YamlError(TOO_DEEP, *_mark(event))
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _FlowBoundScanner(Scanner):
    """PyYAML's scanner, refusing a flow collection past ``DEPTH_MAX`` as it meets it: the scanner
    reads up to 1,024 characters ahead of the composer, at a cost per token that grows with the
    flow depth, so the composer's own check would come after that work."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= DEPTH_MAX:
            mark = self.get_mark()  # type: ignore[attr-defined]  # the Reader's, mixed in beside it
            raise YamlError(TOO_DEEP, mark.line + 1, mark.column + 1)
        super().fetch_flow_collection_start(TokenClass)


class CoreLoader(Reader, _FlowBoundScanner, Parser, _NoAliasComposer, _CoreConstructor, _CoreResolver):
    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        _FlowBoundScanner.__init__(self)
        Parser.__init__(self)
        _NoAliasComposer.__init__(self)
        _CoreConstructor.__init__(self)
        _CoreResolver.__init__(self)


_RESOLVE_MEMO_MAX = 8192
_RESOLVE_MEMO_CHARS = 64
_resolved: dict[str, str] = {}


class _MemoResolver(_CoreResolver):
    """The core resolver, answering a plain scalar seen before from a memo: keys and short
    values (name, description, MIT, true) repeat across thousands of skills. The answer
    depends on the text alone (the core resolver has no path resolvers), so the memo is exact."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        base: Any = super().resolve
        if kind is not ScalarNode or not implicit[0]:
            return base(kind, value, implicit)
        tag = _resolved.get(value)
        if tag is None:
            tag = base(kind, value, implicit)
            if len(value) <= _RESOLVE_MEMO_CHARS and len(_resolved) < _RESOLVE_MEMO_MAX:
                _resolved[value] = tag
        return tag


if _CoreResolver.yaml_path_resolvers:  # pragma: no cover - the memo above relies on there being none
    raise ImportError("the core resolver has path resolvers")


def _c_loader() -> Any:
    """The same loader over libyaml's scanner and parser, when PyYAML was built with it.

    Only the event source changes: composition (with the anchor and alias refusal), the core
    schema resolver and the constructors stay the Python ones above. libyaml makes a
    10,000-skill scan several times faster. The two scanners disagree on a few corners (libyaml
    takes tabs and CRs inside plain scalars, ``|#`` block headers and some multi-line flow
    sequences, some flow mappings that PyYAML refuses), so ``load`` sends only text without those to libyaml,
    and re-parses with the pure loader whenever libyaml refuses: every refusal, with its
    message and position, still comes from the pure loader. A differential fuzz (bench notes)
    found no text where the two then differ.
    """
    try:
        from yaml._yaml import CParser
    except ImportError:
        return None

    class CCoreLoader(_NoAliasComposer, CParser, _CoreConstructor, _MemoResolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _NoAliasComposer.__init__(self)
            _CoreConstructor.__init__(self)
            _MemoResolver.__init__(self)

    class CComposedLoader(CParser, _CoreConstructor, _MemoResolver):
        """libyaml composes too: used only for text without '&' or '*', which no anchor or
        alias can be written without, so the refusal above has nothing to refuse."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _CoreConstructor.__init__(self)
            _MemoResolver.__init__(self)

    return CCoreLoader, CComposedLoader


_C_LOADERS: Any = _c_loader()
_plain_resolver = _MemoResolver()
_BLOCK_HEADER_COMMENT = re.compile(r"[|>][-+0-9]*#")


def _c_safe(text: str) -> bool:
    """True when ``text`` avoids every corner where libyaml and PyYAML are known to differ."""
    if "\t" in text or "\r" in text or (("|" in text or ">" in text) and _BLOCK_HEADER_COMMENT.search(text)):
        return False
    if "{" in text:
        return False  # flow mappings: libyaml takes keys with '?' inside that PyYAML refuses
    if "[" not in text:
        return True
    if "?" in text:
        return False  # flow sequences: libyaml takes '?' inside implicit pairs that PyYAML refuses
    return all(line.count("[") == line.count("]") for line in text.split("\n"))


def _load_with(loader_class: Any, text: str) -> Any:
    loader = loader_class(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


class _NotFast(Exception):
    """A node ``_fast`` does not build; the constructors above decide it instead."""


def _scalar(tag: str, value: str) -> Any:
    if tag == "tag:yaml.org,2002:str":
        return sys.intern(value) if len(value) <= _INTERN_MAX else value
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:bool":
        return value.lower() == "true"
    if tag == "tag:yaml.org,2002:int":
        return (
            int(value[2:], 8)
            if value.startswith("0o")
            else int(value[2:], 16)
            if value.startswith("0x")
            else int(value, 10)
        )
    if tag == "tag:yaml.org,2002:float":
        low = value.lower()
        if low.endswith("inf"):
            return -math.inf if low.startswith("-") else math.inf
        return math.nan if low == ".nan" else float(low)
    raise _NotFast(tag)


def _fast(node: Node, depth: int, values: list[int]) -> Any:
    """The value of a composed node at ``depth``, built directly: the constructors' result for
    the plain core-schema shapes (no generic per-node bookkeeping, which costs most of a
    frontmatter's parse), and ``_NotFast`` for anything else, a document past ``VALUES_MAX``
    (``values[0]`` counts the nodes built) or ``DEPTH_MAX`` included: the pure loader then words
    the refusal. Only for documents without anchors or aliases, where every node is built once."""
    values[0] += 1
    if values[0] > VALUES_MAX or depth > DEPTH_MAX:
        raise _NotFast("past the bounds")
    if isinstance(node, ScalarNode):
        return _scalar(node.tag, node.value)
    depth += 1
    if isinstance(node, MappingNode) and node.tag == _MAP_TAG:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _fast(key_node, depth, values)
            if key in out:  # a duplicate (refused), or an unhashable key (TypeError): not fast
                raise _NotFast("duplicate key")
            out[key] = _fast(value_node, depth, values)
        return out
    if isinstance(node, SequenceNode) and node.tag == _SEQ_TAG:
        return [_fast(child, depth, values) for child in node.value]
    raise _NotFast(node.tag)


_PLAIN = (True, False)


def _resolve_plain(value: str) -> str:
    """The core-schema tag of a plain scalar, as the libyaml loaders resolve it."""
    tag: str = _plain_resolver.resolve(ScalarNode, value, _PLAIN)
    return tag


def _load_fast(loader_class: Any, text: str) -> tuple[Any, Node | None]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        return (None, None) if node is None else (_fast(node, 1, [0]), node)
    finally:
        loader.dispose()


def compose(text: str) -> Node | None:
    """libyaml's node tree for ``text`` when the fast path would read it (no tag resolution
    beyond the core schema's, no value built), else None; raises whatever libyaml raises."""
    if _C_LOADERS is None or not _c_safe(text) or "&" in text or "*" in text:
        return None
    loader = _C_LOADERS[1](text)
    try:
        node: Node | None = loader.get_single_node()
        return node
    finally:
        loader.dispose()


def load(text: str) -> Any:
    """Parse one YAML document under the 1.2 core schema; raise ``YamlError`` on anything else."""
    return load_composed(text)[0]


def load_composed(text: str) -> tuple[Any, Node | yaml_simple.Read | None]:
    """``load``, and how it was read when a fast path read ``text`` (else None): the node tree
    libyaml composed (the events a YAML 1.1 loader over libyaml sees too, so ``yaml11`` can read
    them the 1.1 way without a second parse), or the ``yaml_simple.Read`` of the common shape."""
    if _C_LOADERS is not None and _c_safe(text):
        anchored = "&" in text or "*" in text
        if not anchored:
            simple = yaml_simple.read(text, _resolve_plain, _scalar)
            if simple is not None:
                return simple.value, simple
        # Any refusal falls through: the pure loader below decides, and words, every refusal.
        with contextlib.suppress(Exception):
            if anchored:
                return _load_with(_C_LOADERS[0], text), None
            return _load_fast(_C_LOADERS[1], text)
    return _load_pure(text), None


def _load_pure(text: str) -> Any:
    try:
        return _load_with(CoreLoader, text)
    except YamlError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise YamlError(exc.problem or str(exc), line, column) from None
    except (yaml.YAMLError, ConstructorError, ValueError, RecursionError) as exc:
        raise YamlError(f"the YAML could not be parsed: {exc}") from None
