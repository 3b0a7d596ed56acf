"""Surfaces: the only package that imports the MCP SDK (``stdio.early`` and ``stdio.early_answers`` do not).

Thin translation between the catalog (and the runner's results) and protocol shapes:

    app           assembles one SDK Server (narrowing, capabilities, instructions, handlers)
    state         per-server state every surface shares, and the common catalog look-ups
    answer_bytes  the bound on the file content the answers in progress hold at once
    registry      ToolSpec / ToolCall / ScriptStates - how a tool plugs in
    tools         tools/list and tools/call over the registered specs
    schemas       the read tools' input and output JSON Schemas
    fastcheck     a fast accept for those schemas (jsonschema words every refusal)
    read_tools    skill_list, skill_load, skill_file
    render        the readable content blocks of results that carry file bodies
    search_tool   skill_search
    run_tool      skill_run: the runner's protocol face and the confirmation glue
    run_outputs   a run's files as resource links, and resources/read of skill-run:// URIs
    declared_scripts  ScriptStates of a server with no runner plugged in
    seed_tools    the optional skillmcp profile (list_packs, search_skills, get_skill)
    prompts       one prompt per skill
    resources     skill:// resources, resources/read, directory reads
    skills_ext    skills/list and skills/get (SEP-2640)
    content       MIME types and the text-or-base64 decision
    paging        every page size, cursor and page window
    errors        the one mapping from SkillMcpError to a tool error or a -32602
    handshake     what a refused initialize lacks
    client_logs   logging/setLevel: this server's log records forwarded to the client
    live          list_changed notifications when the catalog changes (serve --watch)
    observe       the request middleware that records spans and durations (telemetry on)
    stdio/        the stdio transport, a package (its docstring lists its modules)
    http/         the Streamable HTTP transport, a package (its docstring lists its modules)

Both transports serve the one server ``app`` assembles.

Importing this package stays cheap: only the registry types are re-exported here.
"""

from skill_mcp.surfaces.registry import ScriptStates, ToolCall, ToolHandler, ToolSpec

__all__ = ["ScriptStates", "ToolCall", "ToolHandler", "ToolSpec"]
