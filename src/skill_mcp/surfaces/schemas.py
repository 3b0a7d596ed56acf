"""JSON Schemas (2020-12) for the read tools' input and output.

Outputs are validated by clients (the SDK's own client checks ``structuredContent`` against
``outputSchema``), so every field a handler emits is described here; objects stay open
(``additionalProperties`` unset) because the sets are additive.
"""

from __future__ import annotations

from typing import Any

from skill_mcp.surfaces.paging import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT

_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}

PROBLEM: dict[str, Any] = {
    "type": "object",
    "required": ["path", "reason", "detail"],
    "properties": {
        "path": _STR,
        "reason": _STR,
        "detail": _STR,
        "level": {"enum": ["error", "warning"]},
        "skill": _STR,
    },
}

SCRIPT: dict[str, Any] = {
    "type": "object",
    "required": ["script", "state"],
    "properties": {
        "script": _STR,
        "interpreter": _STR,
        "state": _STR,
        "reason": _STR,
        "detail": _STR,
        "description": _STR,
        "env": {"type": "array", "items": _STR},
    },
}

REFUSAL: dict[str, Any] = {
    "type": "object",
    "required": ["reason", "detail"],
    "properties": {"reason": _STR, "detail": _STR},
}


SKILL_LIST_IN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cursor": {"type": "string", "description": "nextCursor from the previous page"},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIST_LIMIT,
            "default": DEFAULT_LIST_LIMIT,
            "description": "skills per page",
        },
    },
    "additionalProperties": False,
}

SKILL_LIST_OUT: dict[str, Any] = {
    "type": "object",
    "required": ["skills", "total", "problemCount", "grantFrom"],
    "properties": {
        "skills": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "description", "uri", "fileCount", "scripts"],
                "properties": {
                    "name": _STR,
                    "description": _STR,
                    "uri": _STR,
                    "fileCount": _INT,
                    "scripts": {"type": "array", "items": SCRIPT},
                    "unavailableScripts": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["script", "interpreter", "detail"],
                            "properties": {"script": _STR, "interpreter": _STR, "detail": _STR},
                        },
                    },
                    "ungrantedScripts": {"type": "array", "items": _STR},
                    "skillsListExcluded": _STR,
                },
            },
        },
        "total": _INT,
        "problemCount": _INT,
        "problems": {"type": "array", "items": PROBLEM},
        "problemsByReason": {"type": "object", "additionalProperties": _INT},
        "grantFrom": _STR,
        "grantNote": _STR,
        "nextCursor": _STR,
    },
}

_NAME = {"type": "string", "minLength": 1, "maxLength": 255, "description": "the skill's name, as skill_list gives it"}

SKILL_LOAD_IN: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": _NAME},
    "additionalProperties": False,
}

MANIFEST_FILE: dict[str, Any] = {
    "type": "object",
    "required": ["path", "uri", "size", "digest"],
    "properties": {
        "path": _STR,
        "uri": _STR,
        "size": _INT,
        "mimeType": _STR,
        "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
    },
}

SKILL_LOAD_OUT: dict[str, Any] = {
    "type": "object",
    # SKILL.md's text travels in ``content`` (a resource block), not here: one copy per answer.
    "required": ["name", "uri", "description", "frontmatter", "files", "scripts"],
    "properties": {
        "name": _STR,
        "uri": _STR,
        "description": _STR,
        "frontmatter": {"type": "object"},
        "files": {"type": "array", "items": MANIFEST_FILE},
        "scripts": {"type": "array", "items": SCRIPT},
    },
}

SKILL_FILE_IN: dict[str, Any] = {
    "type": "object",
    "required": ["name", "paths"],
    "properties": {
        "name": _NAME,
        "paths": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string"},
            "description": "paths relative to the skill directory, e.g. references/guide.md (at most 8)",
        },
    },
    "additionalProperties": False,
}

SKILL_FILE_OUT: dict[str, Any] = {
    "type": "object",
    "required": ["name", "files", "served", "failed"],
    "properties": {
        "name": _STR,
        "served": _INT,
        "failed": _INT,
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path"],
                "properties": {
                    "path": _STR,
                    "uri": _STR,
                    "size": _INT,
                    "digest": _STR,
                    "mimeType": _STR,
                    "encoding": {"enum": ["utf-8", "base64"]},
                    # The file's text or base64 travels in ``content`` (a resource block), not here.
                    "error": REFUSAL,
                },
            },
        },
    },
}


# What a client is shown. The SDK's own client (and any client using the pure-Python
# ``jsonschema``) validates every ``structuredContent`` against the advertised ``outputSchema``
# on every call, per (schema node, value) pair it visits: fully typed item schemas made the
# client spend more checking one ``skill_list`` page than the whole rest of the call took, and
# even an item schema of ``{"type": "object", "required": [...]}`` cost a measurable share
# (figures in bench/README.md, "Figures behind design choices"). So the advertised form keeps
# every top-level field typed, and an array of objects is advertised as an array whose
# ``description`` lists the item fields and their types; the strict schema travels beside it
# in the tool's ``_meta`` (``STRICT_SCHEMA_META``) for clients that want it for code
# generation or their own validation, and tests/surfaces/test_output_contract.py holds every
# tool's output to it. Client-side validation then costs a few steps per result, not per item.
STRICT_SCHEMA_META = "io.github.chrischall.skill-mcp/strictOutputSchema"


def describe(schema: Any) -> str:
    """A short type phrase for a schema node: ``string``, ``integer >= 0``, ``array of string`` ..."""
    if schema is True or not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("items", True)
        inner = "objects" if isinstance(items, dict) and items.get("type") == "object" else describe(items)
        return f"array of {inner}"
    if kind == "object" and isinstance(schema.get("properties"), dict):
        return "object {" + ", ".join(schema["properties"]) + "}"
    if kind == "integer" and schema.get("minimum") == 0:
        return "integer >= 0"
    if kind == "string" and "pattern" in schema:
        return f"string matching {schema['pattern']}"
    return str(kind)


def item_fields(item: dict[str, Any]) -> str:
    """``name: string; fileCount: integer >= 0; skillsListExcluded?: string`` (``?``: optional)."""
    required = set(item.get("required", ()))
    return "; ".join(
        f"{name}{'' if name in required else '?'}: {describe(sub)}" for name, sub in item["properties"].items()
    )


def _shallow_array(array: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in array.items() if k != "items"}
    prose = array.get("description")
    out["description"] = (f"{prose} " if prose else "") + (
        f"Each item is an object with {item_fields(array['items'])} "
        f"(item schema in this tool's _meta[{STRICT_SCHEMA_META!r}])."
    )
    return out


def _objects_array(schema: Any) -> bool:
    items = schema.get("items") if isinstance(schema, dict) else None
    return (
        isinstance(schema, dict)
        and schema.get("type") == "array"
        and isinstance(items, dict)
        and isinstance(items.get("properties"), dict)
    )


def advertised(schema: Any) -> Any:
    """``schema`` with every array of objects reduced to an array described in prose (a new object)."""
    if not isinstance(schema, dict):
        return schema
    if _objects_array(schema):
        return _shallow_array(schema)
    out = dict(schema)
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {name: advertised(sub) for name, sub in schema["properties"].items()}
    return out


def advertised_output(schema: Any) -> Any:
    """The ``outputSchema`` a tool advertises: ``advertised(schema)``, whose top-level ``required``
    also admits a refusal (``{reason, detail, ...}``).

    A refused call is ``isError: true`` with ``structuredContent: {reason, detail, ...}``, and the
    official TypeScript SDK's client (the MCP Inspector's, 1.32) checks ``structuredContent``
    against ``outputSchema`` even on an error: a success-only ``required`` turned every refusal
    into a -32602 it raised instead of the tool error the model was meant to read.
    """
    out = advertised(schema)
    if not isinstance(out, dict) or "required" not in out:
        return out
    required = out.pop("required")
    out["anyOf"] = [{"required": list(required)}, {"required": list(REFUSAL["required"])}]
    return out
