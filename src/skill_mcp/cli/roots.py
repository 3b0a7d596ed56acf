"""What every command says first about its roots: one that is not a directory, one that serves nothing.

A mistyped ``--skills-dir`` in a client's configuration, or a root one level too high
(``ROOT/category/skill/SKILL.md``), otherwise looks like "the server works but has no skills".
``catalog.roots.probe_roots`` decides; this module says it once on stderr, before the
command's own work, in the command's mode (a line for a person, a JSON object with ``--json``).
The server says the same in its log and in its MCP ``instructions``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from skill_mcp.reasons import ProblemReason


def note_text(problem: Any) -> str:
    """One sentence naming the root: ``the skills root X is not a directory; ...`` or
    ``no skill found under X: <hint>``."""
    if problem.reason == ProblemReason.ROOT_MISSING:
        return f"the skills root {problem.path} is not a directory; nothing is served from it"
    return f"no skill found under {problem.path}: {problem.detail.partition(': ')[2] or problem.detail}"


def announce(settings: Any, *, json_mode: bool = False) -> tuple[Any, ...]:
    """Say each root note once on stderr; return the notes (``root-missing`` ones make exit 3 for
    the commands that promise it)."""
    from skill_mcp.catalog.roots import probe_roots

    notes = probe_roots(settings)
    for problem in notes:
        level = "error" if problem.reason == ProblemReason.ROOT_MISSING else "warning"
        if json_mode:
            sys.stderr.write(
                json.dumps(
                    {level: note_text(problem), "reason": str(problem.reason), "path": problem.path}, sort_keys=True
                )
                + "\n"
            )
        else:
            sys.stderr.write(f"skill-mcp: {level}: {note_text(problem)}\n")
    sys.stderr.flush()
    return notes
