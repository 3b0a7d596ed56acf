"""The Streamable HTTP transport (through the SDK's app, under uvicorn).

    transport     run_http: the app behind the guard, the listener, the shutdown drain
    guard         the HTTP edge: who may reach the server, and from where (Host, Origin, token)
    events        HTTP answers in a form every official client accepts, whatever their size
    drain         answering calls a shutdown drain has to stop
    conn          the HTTP connection bounds: head deadline, caps that evict, in-flight limit
    protocol      uvicorn's h11 protocol under those bounds
    metrics       the Prometheus scrape endpoint (--metrics) and the HTTP request gauge

Importing this package imports nothing (no uvicorn, no Starlette): each module is imported by name.
"""
