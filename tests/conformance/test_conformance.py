"""The official MCP conformance suite against the real server over Streamable HTTP.

``@modelcontextprotocol/conformance`` (pinned in tools/conformance/package-lock.json, run on the
Node 22 that package brings) runs ``--suite all`` - once at each scenario's default wire, once
more on the 2026-07-28 wire - against ``skill-mcp serve --http --watch`` on 127.0.0.1 serving
``tests/conformance/corpus`` - two skills, the first with nested subdirectories (the directory
scenario descends into the first listed skill). The suite's exit status gates: it fails on any
failure or warning outside ``tools/conformance/expected-failures.yaml``, and on a baseline entry
that has started to pass. The SEP-2640 scenarios are also checked one by one here: every check
SUCCESS, none skipped.

The suite cannot send a bearer token, so the server runs with ``--no-auth`` (loopback only).
Without the Node toolchain (``.ci/setup.d/node.sh``) the test skips locally and fails under CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.http.harness import running_http_server

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "conformance"
NODE = TOOLS / "node_modules" / ".bin" / "node"
SUITE = TOOLS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = TOOLS / "expected-failures.yaml"
CORPUS = Path(__file__).resolve().parent / "corpus"
SEP_2640 = ("sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory")
SUITE_TIMEOUT = 600
# Result directories are named server-<scenario>-<ISO timestamp with dashes>.
_RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(SUITE_TIMEOUT + 60)]


def _toolchain_or_skip() -> None:
    if NODE.exists() and SUITE.exists():
        return
    message = "conformance toolchain missing: run .ci/setup.d/node.sh (npm ci in tools/conformance)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


# Two runs against one server. "all": every scenario at its default wire (extension and
# 2026-07-28 scenarios on the per-request wire, the rest on the 2025-11-25 handshake wire).
# "modern": the scenarios that also apply to 2026-07-28, run again on that wire, because a
# scenario passing on one wire says nothing about the other.
RUNS = {"all": [], "modern": ["--spec-version", "2026-07-28"]}


def _run_suite(url: str, work: Path, name: str) -> dict[str, Any]:
    results = work / f"results-{name}"
    proc = subprocess.run(
        [
            str(NODE),
            str(SUITE),
            "server",
            "--url",
            url,
            "--suite",
            "all",
            *RUNS[name],
            "--expected-failures",
            str(BASELINE),
            "-o",
            str(results),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "NO_COLOR": "1"},
    )
    scenarios: dict[str, list[dict[str, Any]]] = {}
    for checks_file in sorted(results.glob("server-*/checks.json")):
        match = _RESULT_DIR.match(checks_file.parent.name)
        assert match, checks_file
        scenarios[match.group(1)] = json.loads(checks_file.read_text(encoding="utf-8"))
    statuses = Counter(check["status"] for checks in scenarios.values() for check in checks)
    baselined = _baselined_scenarios() | {e.split(":", 1)[0] for e in _baseline_entries() if ":" in e}
    clean = [n for n, checks in scenarios.items() if not any(c["status"] in ("FAILURE", "WARNING") for c in checks)]
    summary = {
        "run": name,
        "scenarios": len(scenarios),
        "scenariosClean": len(clean),
        "scenariosBaselined": len(baselined & set(scenarios)),
        "checks": dict(statuses),
    }
    print(f"conformance summary: {json.dumps(summary, sort_keys=True)}")
    (work / f"summary-{name}.json").write_text(json.dumps(summary, indent=2, sort_keys=True), encoding="utf-8")
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "scenarios": scenarios}


@pytest.fixture(scope="module")
def suite_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run the suite (both runs) against one server; keep exit statuses, output and checks."""
    _toolchain_or_skip()
    work = tmp_path_factory.mktemp("conformance")
    corpus = work / "skills"
    shutil.copytree(CORPUS, corpus)
    # --watch: the server then serves list-changed subscriptions, which the suite checks too.
    with running_http_server([corpus], no_auth=True, watch=True) as server:
        return {name: _run_suite(server.url, work, name) for name in RUNS}


@pytest.fixture
def suite_run(suite_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return suite_runs["all"]


@pytest.mark.parametrize("run", sorted(RUNS))
def test_conformance_suite_passes_against_its_baseline(suite_runs: dict[str, dict[str, Any]], run: str) -> None:
    result = suite_runs[run]
    tail = result["stdout"][-6000:]
    assert result["returncode"] == 0, f"conformance suite ({run}) failed:\n{tail}\n{result['stderr'][-2000:]}"
    assert "Baseline check passed" in result["stdout"]


def test_the_modern_run_covered_the_core_listings_on_the_per_request_wire(
    suite_runs: dict[str, dict[str, Any]],
) -> None:
    modern = suite_runs["modern"]["scenarios"]
    for scenario in ("tools-list", "resources-list", "prompts-list", "caching", "dns-rebinding-protection"):
        assert modern.get(scenario), f"{scenario} did not run on the 2026-07-28 wire"
        assert all(c["status"] in ("SUCCESS", "INFO") for c in modern[scenario]), scenario


@pytest.mark.parametrize("scenario", SEP_2640)
def test_sep_2640_scenario_passes_every_check(suite_run: dict[str, Any], scenario: str) -> None:
    checks = suite_run["scenarios"].get(scenario)
    assert checks, f"{scenario} did not run"
    not_ok = [(c["id"], c["status"], c.get("errorMessage")) for c in checks if c["status"] != "SUCCESS"]
    assert not_ok == []


@pytest.mark.parametrize("run", sorted(RUNS))
def test_core_scenarios_outside_the_baseline_have_no_failure_or_warning(
    suite_runs: dict[str, dict[str, Any]], run: str
) -> None:
    baselined = _baselined_scenarios()
    bad = {
        name: [(c["id"], c["status"]) for c in checks if c["status"] in ("FAILURE", "WARNING")]
        for name, checks in suite_runs[run]["scenarios"].items()
        if name not in baselined
    }
    bad = {k: v for k, v in bad.items() if v and not _only_baselined_checks(k, v)}
    assert bad == {}


def test_dns_rebinding_scenario_ran_and_passed(suite_run: dict[str, Any]) -> None:
    checks = {c["id"]: c["status"] for c in suite_run["scenarios"]["dns-rebinding-protection"]}
    assert checks["localhost-host-rebinding-rejected"] == "SUCCESS"
    assert checks["localhost-host-valid-accepted"] == "SUCCESS"


def _baseline_entries() -> list[str]:
    entries = []
    for line in BASELINE.read_text(encoding="utf-8").splitlines():
        stripped = line.split("#", 1)[0].strip()
        if stripped.startswith("- "):
            entries.append(stripped[2:].strip())
    return entries


def _baselined_scenarios() -> set[str]:
    return {e for e in _baseline_entries() if ":" not in e}


def _only_baselined_checks(scenario: str, bad: list[tuple[str, str]]) -> bool:
    per_check = {e.split(":", 1)[1] for e in _baseline_entries() if e.startswith(f"{scenario}:")}
    return all(check_id in per_check for check_id, _ in bad)


def test_baseline_names_only_fixture_or_extension_scenarios() -> None:
    """Every entry carries a one-line reason, and no SEP-2640 scenario is ever baselined."""
    lines = [line for line in BASELINE.read_text(encoding="utf-8").splitlines() if line.strip().startswith("- ")]
    assert lines
    for line in lines:
        entry, _, reason = line.partition("#")
        assert reason.strip(), f"baseline entry without a reason: {line!r}"
        assert not entry.strip()[2:].startswith("sep-2640"), f"SEP-2640 scenarios may not be baselined: {line!r}"
