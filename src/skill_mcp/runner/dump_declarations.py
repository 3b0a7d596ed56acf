"""``python -I -m skill_mcp.runner.dump_declarations``: the skills' declarations, as the declared-skills document.

The appliance's broker is root and must never parse an untrusted file (SKILL.md is written by
whoever wrote the skill). It starts this program instead, as a uid of its own with no
capabilities, no-new-privileges and tight resource limits (``skill_mcp_launcher.parse_helper``),
and decodes what comes back. The parse is the catalog's own (``build_catalog``: the 64 KiB
frontmatter cap, YAML 1.2 core schema without anchors or aliases, the symlink rules), so the
broker sees exactly the declarations the server serves.

Input: the skills roots in ``SKILLS_DIR`` (and ``MCP_SKILLS_PATH``), as the server reads them.
Output (stdout): one ``skill_mcp.declwire`` document, its records encoded by ``declwire.encode``
(the shape is written there, beside the decoder the broker uses). Only skills that declare
scripts are listed: the others cannot run. Diagnostics go to stderr; nothing else to stdout.
"""

from __future__ import annotations

import os
import sys

from skill_mcp.catalog.discover import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.declwire import DeclaredScript, DeclaredSkill, encode, skill_md_key
from skill_mcp.models import Catalog
from skill_mcp.proctools import set_nondumpable


def declared_skills(catalog: Catalog) -> list[DeclaredSkill]:
    """The catalog's skills that declare scripts, as the document's records."""
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
        skills.append(
            DeclaredSkill(
                skill.name,
                directory,
                key,
                tuple(decl.egress),
                tuple(DeclaredScript(r.script, r.interpreter, tuple(r.env), r.timeout) for r in decl.run),
            )
        )
    return skills


def main() -> int:
    # Before anything is read: no other process of this uid may attach to this one.
    problem = set_nondumpable()
    if problem is not None:
        print(f"dump_declarations: {problem}", file=sys.stderr)
        return 2
    catalog = build_catalog(load_settings(environ=os.environ))
    sys.stdout.buffer.write(encode(os.getuid(), declared_skills(catalog)))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
