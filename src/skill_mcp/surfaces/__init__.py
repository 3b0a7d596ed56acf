"""Surfaces: the only package that imports the MCP SDK.

Thin translation between the catalog (and the runner's results) and protocol shapes:

    registry    ToolSpec / ToolCall / ScriptStates - how a tool plugs in
    tools       tools/list and tools/call over the registered specs
    read_tools  skill_list, skill_load, skill_file
    prompts     one prompt per skill
    resources   skill:// resources, resources/read, resources/directory/read
    skills_ext  skills/list and skills/get (SEP-2640)
    errors      the one mapping from SkillMcpError to a tool error or a -32602
    app         assembles one SDK Server (narrowing, capabilities, instructions)
    stdio       the stdio transport, answering unparseable lines with -32700

Importing this package stays cheap: only the registry types are re-exported here.
"""

from skill_mcp.surfaces.registry import ScriptStates, ToolCall, ToolHandler, ToolSpec

__all__ = ["ScriptStates", "ToolCall", "ToolHandler", "ToolSpec"]
