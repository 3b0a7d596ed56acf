"""The launcher's imports are an allowlist: the standard library, ``python-prctl`` and ``psutil``
(the two libraries chosen for capabilities and for processes), and the stdlib-only
leaves of ``skill_mcp`` it shares with the server. Importing every module of it loads nothing else.

Runs without Docker. It never imports the catalog: SKILL.md is parsed by the unprivileged
helper it execs.
"""

from __future__ import annotations

import json
import subprocess
import sys

LAUNCHER_MODULES = (
    "boot",
    "broker",
    "caps",
    "checks",
    "fence",
    "isolation",
    "parse_helper",
    "policy",
    "procs",
    "proxy",
    "sandbox",
)
# The leaves both sides share: path rules, reasons, run limits, tree removal, the process helpers,
# the grant rules, the broker's framing, the declared-skills document, the depth-bounded JSON
# decode, a run's outputs and its kernel sandbox (the Landlock and libseccomp bindings, and what
# applies them).
ALLOWED_PROJECT = {
    "skill_mcp",
    "skill_mcp.paths",
    "skill_mcp.errors",
    "skill_mcp.reasons",
    "skill_mcp.limits",
    "skill_mcp.sandbox_rules",
    "skill_mcp.trees",
    "skill_mcp.proctools",
    "skill_mcp.grantrules",
    "skill_mcp.brokerwire",
    "skill_mcp.declwire",
    "skill_mcp.jsonbound",
    "skill_mcp.outputs",
    "skill_mcp.confine",
    "skill_mcp.landlock",
    "skill_mcp.seccomp",
}
ALLOWED_LIBRARIES = {"prctl", "_prctl", "psutil"}  # top-level names: psutil's own submodules come with it


def _loaded_by(imports: list[str]) -> list[str]:
    code = (
        "import json, sys\nbefore = set(sys.modules)\n"
        + "".join(f"import {name}\n" for name in imports)
        + "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, check=True, timeout=60)
    return list(json.loads(out.stdout))


def _foreign(modules: list[str]) -> list[str]:
    bad = []
    for name in modules:
        top = name.split(".")[0]
        if (
            top in sys.stdlib_module_names
            or top == "skill_mcp_launcher"
            or name in ALLOWED_PROJECT
            or top in ALLOWED_LIBRARIES
        ):
            continue
        bad.append(name)
    return bad


def test_launcher_imports_only_the_allowlist() -> None:
    loaded = _loaded_by([f"skill_mcp_launcher.{m}" for m in LAUNCHER_MODULES])
    assert "skill_mcp_launcher.boot" in loaded  # positive control: the imports happened
    assert {"prctl", "psutil"} <= set(loaded)  # and the two named libraries are what it uses
    assert _foreign(loaded) == []


def test_import_pin_detects_a_third_party_module() -> None:
    # The same check flags a non-stdlib import, so the test above can fail.
    assert "yaml" in _foreign(_loaded_by(["yaml"]))
    assert "skill_mcp.config" in _foreign(["skill_mcp.config"])
