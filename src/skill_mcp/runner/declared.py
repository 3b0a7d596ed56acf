"""``python -I -m skill_mcp.runner.declared``: the skills' declarations, as a small JSON document.

The appliance's broker is root and must never parse an untrusted file (SKILL.md is written by
whoever wrote the skill). It starts this program instead, as a uid of its own with no
capabilities, no-new-privileges and tight resource limits (``skill_mcp_launcher.declared``),
and checks the shape of what comes back. The parse is the catalog's own (``build_catalog``:
the 64 KiB frontmatter cap, YAML 1.2 core schema without anchors or aliases, the symlink
rules), so the broker sees exactly the declarations the server serves.

Input: the skills roots in ``SKILLS_DIR`` (and ``MCP_SKILLS_PATH``), as the server reads them.
Output (stdout, one JSON object)::

    {"uid": n, "skills": [{"name", "directory", "skillMd": [dev, ino, size, mtime_ns, ctime_ns],
                           "egress": [...], "scripts": [{"script", "interpreter", "env", "timeout"}]}]}

``skillMd`` is the SKILL.md's identity when it was read, so the broker can tell (by a stat,
which parses nothing) that a skill changed and ask again. Only skills that declare scripts
are listed: the others cannot run. Diagnostics go to stderr; nothing else to stdout.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.runner.harden import set_nondumpable


def skill_md_key(directory: str) -> list[int]:
    st = os.stat(os.path.join(directory, "SKILL.md"))
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def document(catalog: Catalog) -> dict[str, Any]:
    skills = []
    for skill in catalog.skills.values():
        decl = skill.declaration
        if decl is None or not decl.run:
            continue
        directory = str(skill.directory)
        try:
            key = skill_md_key(directory)
        except OSError:
            continue  # gone since the scan: not listed, so the broker refuses it as unknown
        skills.append({
            "name": skill.name, "directory": directory, "skillMd": key, "egress": list(decl.egress),
            "scripts": [{"script": r.script, "interpreter": r.interpreter, "env": list(r.env),
                         "timeout": r.timeout} for r in decl.run],
        })
    return {"uid": os.getuid(), "skills": skills}


def main() -> int:
    # Before anything is read: no other process of this uid may attach to this one.
    problem = set_nondumpable()
    if problem is not None:
        print(f"declared: {problem}", file=sys.stderr)
        return 2
    catalog = build_catalog(load_settings(environ=os.environ))
    sys.stdout.write(json.dumps(document(catalog), separators=(",", ":")))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
