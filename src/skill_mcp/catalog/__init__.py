"""The catalog: discovery, strict frontmatter, the ``mcp-host:`` declaration, file rules.

Public entry points: ``build_catalog(settings)`` and the readers in ``catalog.files``.

``build_catalog`` is loaded on first access (PEP 562): importing one module of the package,
as a server's start-up does with ``catalog.lazy``, must not import the whole scanner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog.discover import build_catalog

__all__ = ["build_catalog"]


def __getattr__(name: str) -> Any:
    if name == "build_catalog":
        from skill_mcp.catalog.discover import build_catalog

        return build_catalog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
