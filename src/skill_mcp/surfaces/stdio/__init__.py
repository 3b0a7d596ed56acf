"""The stdio transport: one server on this process's stdin and stdout.

    transport     run_stdio: claims fds 0 and 1 and serves one server on them
    stdin_lines   stdin read on the event loop, one bounded line at a time
    frame_writer  stdout written from the event loop, one whole frame at a time
    unparseable   -32700 / -32600 answers for lines the SDK drops; the end-of-input drain
    early         a plain handshake answered before the SDK is imported (stdlib only)
    early_answers the SDK server's own handshake answers, frozen (generated; held equal by a test)
    early_calls   skill_list and skill_search answered before the SDK is imported, in its wire form
    load_gate     the SDK's import, paused while an early answer is being computed

Importing this package imports nothing: each module is imported by name.
"""
