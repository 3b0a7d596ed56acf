"""Surfaces: the only package that imports the MCP SDK (``early`` and ``early_answers`` do not).

Thin translation between the catalog (and the runner's results) and protocol shapes:

    app           assembles one SDK Server (narrowing, capabilities, instructions, handlers)
    state         per-server state every surface shares, and the common catalog look-ups
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
    early         a plain handshake answered before the SDK is imported (stdlib only)
    early_answers the SDK server's own handshake answers, frozen (generated; held equal by a test)
    client_logs   logging/setLevel: this server's log records forwarded to the client
    live          list_changed notifications when the catalog changes (serve --watch)
    stdio         the stdio transport: claims fds 0 and 1 and serves on them
    stdin_lines   stdin read on the event loop, one bounded line at a time
    frame_writer  stdout written from the event loop, one whole frame at a time
    unparseable   -32700 / -32600 answers for lines the SDK drops; the end-of-input drain
    http          the Streamable HTTP transport (through the SDK)
    http_guard    the HTTP edge: who may reach the server, and from where
    http_events   HTTP answers in a form every official client accepts, whatever their size
    http_drain    answering calls a shutdown drain has to stop
    http_conn     the HTTP connection bounds: head deadline, caps that evict, in-flight limit
    http_protocol uvicorn's h11 protocol under those bounds
    http_metrics  the Prometheus scrape endpoint (--metrics) and the HTTP request gauge
    observe       the request middleware that records spans and durations (telemetry on)

Importing this package stays cheap: only the registry types are re-exported here.
"""

from skill_mcp.surfaces.registry import ScriptStates, ToolCall, ToolHandler, ToolSpec

__all__ = ["ScriptStates", "ToolCall", "ToolHandler", "ToolSpec"]
