"""One prompt per served skill: the prompt's single message is the skill's instructions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import mcp_types as types

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.errors import invalid_params
from skill_mcp.surfaces.paging import PROMPTS_PAGE, decode_cursor, encode_cursor, window
from skill_mcp.surfaces.state import SKILL_MD

# The file readers (catalog.files, and the catalog records behind them) are imported by the
# functions that read: building a server imports this module, and must not import those
# before the first request that reads (start-up stays independent of the number of skills).
if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Catalog


def list_prompts(catalog: Catalog, cursor: str | None) -> types.ListPromptsResult:
    try:
        offset = decode_cursor("prompts", cursor)
    except SkillMcpError as err:
        raise invalid_params(err) from None
    names = catalog.names()
    shown, nxt = window(names, offset, PROMPTS_PAGE)
    prompts = [types.Prompt(name=n, description=catalog.skills[n].description) for n in shown]
    return types.ListPromptsResult(
        prompts=prompts, next_cursor=encode_cursor("prompts", nxt) if nxt is not None else None
    )


def body_size(catalog: Catalog, name: str) -> int:
    """What the prompt ``name``'s answer reads: its SKILL.md, as large as the scan saw it (0 for
    no such prompt)."""
    skill = catalog.skills.get(name)
    found = skill.file(SKILL_MD) if skill is not None else None
    return 0 if found is None else found.size


def get_prompt(catalog: Catalog, name: str) -> types.GetPromptResult:
    import skill_mcp.catalog.files as catfiles

    skill = catalog.skills.get(name)
    if skill is None:
        raise invalid_params(SkillMcpError(Refusal.UNKNOWN_SKILL, f"no prompt named {name!r}", {"name": name}))
    try:
        body = catfiles.read_body(skill)
    except SkillMcpError as err:
        raise invalid_params(err) from None
    return types.GetPromptResult(
        description=skill.description,
        messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=body))],
    )
