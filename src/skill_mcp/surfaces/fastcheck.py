"""A fast accept for the tools' input schemas; ``jsonschema`` still words every refusal.

``ToolTable`` checks a call's arguments against the tool's input schema before the handler
runs. ``jsonschema`` does that per (schema node, value) pair, a cost that is a noticeable share
of a whole read call (figures in bench/README.md, "Figures behind design choices").
``compile_accept`` turns an input schema into a predicate built from plain Python
checks, for the small keyword set our input schemas use. It only ever *accepts*: when it says
True the arguments are valid; when it says False (or a schema uses a keyword it does not
know, so no predicate is built), ``jsonschema`` runs as before and decides, with its own
error messages. tests/surfaces/test_fastcheck.py holds it to that: whatever it accepts,
``jsonschema`` accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Accept = Callable[[Any], bool]

# Keywords that never affect validity.
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})


def _is_integer(value: Any) -> bool:
    # JSON Schema: 1.0 is an integer, True is not.
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPE_CHECKS: dict[str, Accept] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _type(spec: Any) -> Accept | None:
    names = [spec] if isinstance(spec, str) else spec
    if not isinstance(names, list) or not all(isinstance(n, str) and n in _TYPE_CHECKS for n in names):
        return None
    checks = [_TYPE_CHECKS[n] for n in names]
    return checks[0] if len(checks) == 1 else (lambda v: any(c(v) for c in checks))


def _bound(key: str, limit: Any) -> Accept | None:
    if not _is_number(limit):
        return None
    if key == "minimum":
        return lambda v: not _is_number(v) or v >= limit
    if key == "maximum":
        return lambda v: not _is_number(v) or v <= limit
    if not _is_integer(limit):
        return None
    size = {"minLength": (str, 1), "maxLength": (str, -1), "minItems": (list, 1), "maxItems": (list, -1)}[key]
    kind, sign = size
    if sign > 0:
        return lambda v: not isinstance(v, kind) or len(v) >= limit
    return lambda v: not isinstance(v, kind) or len(v) <= limit


def _object(schema: dict[str, Any]) -> Accept | None:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(props, dict) or not isinstance(required, list) or extra not in (True, False):
        return None
    compiled = {name: compile_accept(sub) for name, sub in props.items()}
    if any(c is None for c in compiled.values()):
        return None
    checks: dict[str, Accept] = {k: c for k, c in compiled.items() if c is not None}
    closed = extra is False

    def accept(v: Any) -> bool:
        if not isinstance(v, dict):
            return True  # not an object: the object keywords do not apply
        for name in required:
            if name not in v:
                return False
        for name, value in v.items():
            check = checks.get(name)
            if check is None:
                if closed:
                    return False
            elif not check(value):
                return False
        return True

    return accept


def _items(sub: Any) -> Accept | None:
    check = compile_accept(sub)
    if check is None:
        return None
    return lambda v: not isinstance(v, list) or all(check(item) for item in v)


def compile_accept(schema: Any) -> Accept | None:
    """A predicate that is True only for values ``schema`` accepts; None when not supported."""
    if schema is True:
        return lambda v: True
    if not isinstance(schema, dict):
        return None
    checks: list[Accept] = []
    for key, value in schema.items():
        check: Accept | None
        if key in _ANNOTATIONS or key in ("properties", "required", "additionalProperties"):
            continue
        if key == "type":
            check = _type(value)
        elif key in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"):
            check = _bound(key, value)
        elif key == "items":
            check = _items(value)
        else:
            return None  # a keyword this fast path does not know: jsonschema decides
        if check is None:
            return None
        checks.append(check)
    if any(k in schema for k in ("properties", "required", "additionalProperties")):
        obj = _object(schema)
        if obj is None:
            return None
        checks.append(obj)
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)
