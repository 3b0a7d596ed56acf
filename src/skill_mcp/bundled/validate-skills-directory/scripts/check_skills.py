"""Validate a skills directory with skill-mcp's own validator and summarise it per reason.

Usage: check_skills.py [ROOT...] [--json]   (default ROOT: the directory holding this skill)

This is `skill-mcp validate --strict ROOT...` run from inside a skill: the same parser, the
same floors, the same report (one line per problem, the verdict, a count per reason) and the
same exit codes (0 no error-level problem, 1 at least one, 2 usage). There is no second
implementation to drift from the first. It needs the skill-mcp that ships it: the package
directory that holds this skill is tried first, then an installed ``skill_mcp``; when neither
can be imported it says so on stderr and exits 3.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve()
THIS_SKILL = HERE.parents[1]
EXIT_UNAVAILABLE = 3


def _put_shipping_package_first() -> None:
    # In a bundled pack this file is <pkgroot>/skill_mcp/bundled/<skill>/scripts/, and the
    # validator to run is the one of the skill-mcp that ships it, not some other copy.
    package = HERE.parents[3]
    if package.name == "skill_mcp" and (package / "__init__.py").is_file():
        sys.path.insert(0, str(package.parent))


def main(argv: list[str]) -> int:
    _put_shipping_package_first()
    try:
        from skill_mcp.cli import main as skill_mcp_main
    except Exception as exc:  # any import failure means the same thing here: no validator to run
        sys.stderr.write(
            f"check_skills.py: cannot import skill-mcp's validator with {sys.executable} "
            f"(Python {sys.version.split()[0]}): {exc}\n"
            "Run `skill-mcp validate --strict ROOT` where skill-mcp is installed instead.\n")
        return EXIT_UNAVAILABLE
    if not any(not arg.startswith("-") for arg in argv):
        argv = [*argv, str(THIS_SKILL.parent)]
    return skill_mcp_main(["validate", "--strict", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
