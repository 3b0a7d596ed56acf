"""A small generated catalog with three folders the scan must refuse or warn about, shared by the
suites that hold a shared cold scan (worker processes, the scan helper) to the serial one."""

from __future__ import annotations

from pathlib import Path

from bench.corpus import generate


def make(root: Path) -> Path:
    """Forty generated skills, a broken frontmatter, a name that breaks the rules and a YAML-1.1
    ambiguity, under ``root``."""
    generate(root, 40)
    (root / "broken-frontmatter").mkdir()
    (root / "broken-frontmatter" / "SKILL.md").write_text("---\nname: [\n---\nbody\n")
    (root / "Bad_Name").mkdir()
    (root / "Bad_Name" / "SKILL.md").write_text("---\nname: x\ndescription: d\n---\nbody\n")
    (root / "ambiguous").mkdir()
    (root / "ambiguous" / "SKILL.md").write_text("---\nname: ambiguous\ndescription: d\nlicense: yes\n---\nbody\n")
    return root
