"""pyproject.toml builds without the deprecation warnings a fresh ``make install`` would show."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_license_is_an_spdx_expression_and_the_build_backend_reads_it_as_one() -> None:
    # setuptools deprecates the table form ({text = "MIT"}) and stops building it in 2027; the
    # string form needs setuptools 77 or later in the build environment.
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["project"]["license"] == "MIT"
    (backend,) = [r for r in config["build-system"]["requires"] if r.startswith("setuptools")]
    floor = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", backend)
    assert floor is not None and int(floor.group(1)) >= 77, backend


def test_the_readme_names_what_installing_builds_from_source() -> None:
    # python-prctl ships no wheel: `make run` on a machine with only Python and venv failed in
    # its C build. The README's first set-up paragraph must say what that build needs.
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    if not any(d.startswith("python-prctl") for d in config["project"]["dependencies"]):
        return
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    setup = readme[readme.index("make run") : readme.index("## Connecting a client")]
    for needed in ("python-prctl", "gcc", "libcap-dev", "python3-dev", ".ci/setup.d/prctl.sh"):
        assert needed in setup, needed
