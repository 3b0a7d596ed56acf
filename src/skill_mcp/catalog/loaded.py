"""``Loaded``: what loading one skill directory gave, the unit the catalog cache keeps.

Apart from the loader (``catalog.skill``) so that a warm build, which decodes every result from
the cache and loads none, never imports the scanner (the frontmatter's YAML readers, the
declaration's checks, the workers that share a cold scan).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog.files import Stamp
    from skill_mcp.models import Problem, Skill


@dataclass(frozen=True, slots=True)
class Loaded:
    skill: Skill | None
    problems: tuple[Problem, ...]
    nested: tuple[Path, ...] = ()
    # What the result depends on (``files.Stamp``), and whether those stamps are all of it: a
    # result that follows a link or met an unreadable entry is never served from the cache.
    stamps: tuple[Stamp, ...] = ()
    stampable: bool = False
