"""The composition root: the one place that wires the layers together (docs/architecture.md
draws it above ``surfaces``). It builds the catalog provider from the settings, the runner and
the search state with their tools, hands them to ``surfaces.app.assemble``, and gives the
result to a transport in ``surfaces`` (stdio, or Streamable HTTP with the runner's closers as
its stop hooks). It does not import ``mcp`` itself.

- ``compose``: what a server is made of (``Shared``, ``shared_parts``, ``plugins``,
  ``build_server``, ``telemetry_for``), built the same way for every transport;
- ``catalogs``: the catalog provider, its build ahead of the first request (``prebuild``) and
  the announcements of a reloading one;
- ``stdio``: ``serve_stdio_early`` and ``serve_stdio``;
- ``http``: ``serve_http``.

    python -m skill_mcp.server [--skills-dir DIR ...]   # same as `skill-mcp serve`
"""

from __future__ import annotations

from skill_mcp.server.catalogs import announce_reloads, catalog_source, prebuild, static_catalog
from skill_mcp.server.compose import Plugins, RunHooks, Shared, build_server, plugins, shared_parts, telemetry_for
from skill_mcp.server.http import serve_http
from skill_mcp.server.stdio import INTERRUPTED_EXIT, serve_stdio, serve_stdio_early

__all__ = [
    "INTERRUPTED_EXIT",
    "Plugins",
    "RunHooks",
    "Shared",
    "announce_reloads",
    "build_server",
    "catalog_source",
    "plugins",
    "prebuild",
    "serve_http",
    "serve_stdio",
    "serve_stdio_early",
    "shared_parts",
    "static_catalog",
    "telemetry_for",
]
