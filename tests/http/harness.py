"""Connect the SDK's client to the real server over Streamable HTTP.

The server side - ``skill-mcp serve --http`` in a subprocess, ``running_http_server`` and its
``HttpServer`` - is the one scaffold every suite uses, ``tests/serve.py``; its names are
re-exported here for the HTTP suite's modules. For any test that wants the HTTP transport (and
for the integration suite parametrised over stdio and HTTP):

    with running_http_server([skills_root], token=TOKEN) as srv:      # or no_auth=True
        async with http_client(srv.url, token=TOKEN) as client:        # an mcp.Client
            await client.list_tools()
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.serve import HttpServer, child_env, running_http_server, server_argv

__all__ = ["HttpServer", "child_env", "http_client", "http_connect", "running_http_server", "server_argv"]


@asynccontextmanager
async def http_client(
    url: str,
    *,
    token: str | None = None,
    mode: str = "legacy",
    headers: Mapping[str, str] | None = None,
    max_sse_event_size: int | None = None,
    **client_kwargs: Any,
) -> AsyncIterator[Any]:
    """An ``mcp.Client`` over Streamable HTTP. ``mode``: ``legacy`` (initialize handshake) or
    ``2026-07-28`` (per-request era); ``auto`` probes. ``max_sse_event_size`` overrides the SDK
    client's 1 MiB cap on one SSE event (handshake-era answers travel as one event)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    all_headers = dict(headers or {})
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    timeout = httpx2.Timeout(30.0, read=60.0)
    async with httpx2.AsyncClient(headers=all_headers, timeout=timeout) as http:
        sse_cap: dict[str, Any] = {} if max_sse_event_size is None else {"max_sse_event_size": max_sse_event_size}
        transport = streamable_http_client(url, http_client=http, **sse_cap)
        async with Client(transport, mode=mode, **client_kwargs) as client:
            yield client


@asynccontextmanager
async def http_connect(
    root: Path, era: str, env: Mapping[str, str] | None = None, **client_kwargs: Any
) -> AsyncIterator[Any]:
    """Drop-in twin of ``tests.integration.harness.connect`` over Streamable HTTP.

    Starts its own server (token auth, 127.0.0.1, port 0) serving ``root`` with ``env`` and
    yields an ``mcp.Client`` in ``era`` (``legacy`` or ``2026-07-28``).
    """
    token = "integration-token-0123456789abcdef"
    with running_http_server([root], token=token, env=env) as server:
        async with http_client(server.url, token=token, mode=era, **client_kwargs) as client:
            yield client
