"""The catalog: discovery, strict frontmatter, the ``mcp-host:`` declaration, file rules.

Public entry points: ``build_catalog(settings)`` and the readers in ``catalog.files``.
"""

from skill_mcp.catalog.discover import build_catalog

__all__ = ["build_catalog"]
