"""The ``skillmcp`` compatibility profile: ``list_packs``, ``search_skills`` and ``get_skill``.

``skillmcp`` is the name this server was first described by, with three tools; prompts and
scripts written for that interface call them by those names. With ``SKILL_MCP_COMPAT=skillmcp`` this server offers
them too, beside its own tools, answering from the same catalog and the same search index:

- ``list_packs {}`` -> ``{packs: [{name, skills[], count, phases[]}], total}``; skills that no
  ``pack.json`` pins are grouped under the pack name ``null``;
- ``search_skills {query, limit?}`` -> ``{matches: [name], total}``, best first, the ranking of
  ``skill_search`` (``total`` counts the matches returned);
- ``get_skill {name}`` -> ``{name, description, uri, pack, phase, tags[], markdown}`` where
  ``markdown`` is the SKILL.md body; an unknown name is a tool error ``unknown-skill``.

Off by default: the project's own tools say more (problems, digests, scripts), and a client
should not see two tools for one job unless it was written for the other names.
"""

from __future__ import annotations

from typing import Any

import anyio

from skill_mcp.surfaces.registry import ToolCall, ToolSpec
from skill_mcp.surfaces.search_tool import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, SearchState
from skill_mcp.surfaces.state import SKILL_MD, find_skill

PROFILE = "skillmcp"
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}

LIST_PACKS_IN: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
LIST_PACKS_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "packs": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": ["string", "null"]},
                    "skills": {"type": "array", "items": {"type": "string"}},
                    "count": {"type": "integer"},
                    "phases": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["name", "skills", "count", "phases"],
            },
        },
        "total": {"type": "integer"},
    },
    "required": ["packs", "total"],
}
SEARCH_IN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
    },
    "required": ["query"],
    "additionalProperties": False,
}
SEARCH_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {"matches": {"type": "array", "items": {"type": "string"}}, "total": {"type": "integer"}},
    "required": ["matches", "total"],
}
GET_IN: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 256}},
    "required": ["name"],
    "additionalProperties": False,
}
GET_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "uri": {"type": "string"},
        "pack": {"type": ["string", "null"]},
        "phase": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "markdown": {"type": "string"},
    },
    "required": ["name", "description", "uri", "pack", "phase", "tags", "markdown"],
}


def _phase(skill: Any) -> str | None:
    if skill.phase:
        return str(skill.phase)
    meta = skill.frontmatter.get("metadata")
    return str(meta["phase"]) if isinstance(meta, dict) and isinstance(meta.get("phase"), str) else None


async def list_packs(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    groups: dict[str | None, list[Any]] = {}
    for skill in call.catalog.skills.values():
        groups.setdefault(skill.pack, []).append(skill)
    packs = [
        {
            "name": name,
            "skills": [s.name for s in skills],
            "count": len(skills),
            "phases": sorted({p for s in skills if (p := _phase(s)) is not None}),
        }
        for name, skills in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
    ]
    return {"packs": packs, "total": len(packs)}


async def get_skill(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    import skill_mcp.catalog.files as catfiles

    skill = find_skill(call.catalog, args["name"])
    markdown = await anyio.to_thread.run_sync(catfiles.read_body, skill)
    return {
        "name": skill.name,
        "description": skill.description,
        "uri": catfiles.skill_uri(skill, SKILL_MD),
        "pack": skill.pack,
        "phase": _phase(skill),
        "tags": list(skill.tags),
        "markdown": markdown,
    }


def seed_tool_specs(search: SearchState) -> tuple[ToolSpec, ...]:
    """The three tools, ``search_skills`` sharing ``search``'s index with ``skill_search``."""

    async def search_skills(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
        found = await search.answer(call.catalog, str(args["query"]), int(args.get("limit", DEFAULT_LIMIT)))
        matches = [hit["name"] for hit in found["hits"]]
        return {"matches": matches, "total": len(matches)}

    return (
        ToolSpec(
            name="list_packs",
            title="List packs (skillmcp profile)",
            input_schema=LIST_PACKS_IN,
            output_schema=LIST_PACKS_OUT,
            handler=list_packs,
            annotations=READ_ONLY,
            description="List the skill packs served and the skills in each (skillmcp compatibility).",
        ),
        ToolSpec(
            name="search_skills",
            title="Search skills (skillmcp profile)",
            input_schema=SEARCH_IN,
            output_schema=SEARCH_OUT,
            handler=search_skills,
            annotations=READ_ONLY,
            description=(
                "Search skills by keywords over name, title, tags and description; returns the "
                "matching skill names, best first (skillmcp compatibility)."
            ),
        ),
        ToolSpec(
            name="get_skill",
            title="Get one skill (skillmcp profile)",
            input_schema=GET_IN,
            output_schema=GET_OUT,
            handler=get_skill,
            annotations=READ_ONLY,
            description="Fetch one skill's procedure (its SKILL.md body) by name (skillmcp compatibility).",
        ),
    )
