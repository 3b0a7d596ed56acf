"""The server's runner: the process hardened at boot, the fence built once, on first need.

``DeferredRunner.boot`` is what ``server.plugins`` calls before anything is served. These tests
hold it to its boot guarantees: the environ block is wiped and the process
non-dumpable when ``boot`` returns (before any request), a failed wipe is announced then and
only then, and every answer comes from one runner built once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.config import load_settings
from skill_mcp.models import ScriptDecl
from skill_mcp.runner import deferred
from skill_mcp.runner.deferred import DeferredRunner
from skill_mcp.runner.harden import HardenReport

from .helpers import catalog_of, make_skill

SECRET = "PROBE-deferred-5c4b3a"

BOOT_THEN_LOOK = r"""
import ctypes, json, os, sys
from skill_mcp.config import load_settings
from skill_mcp.runner.deferred import DeferredRunner
runner = DeferredRunner.boot(load_settings((), dict(os.environ)), audit=lambda record: None)
block = open("/proc/self/environ", "rb").read()
dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
print(json.dumps({"secret_in_block": b"PROBE" in block, "dumpable": dumpable, "built": runner.built,
                  "fence_imported": "skill_mcp.runner.core" in sys.modules,
                  "environ_kept": os.environ.get("PROBE_SECRET")}))
"""


def test_boot_wipes_the_environ_block_and_drops_dumpable_before_it_returns() -> None:
    env = {"PATH": "/usr/bin:/bin", "PROBE_SECRET": SECRET, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", BOOT_THEN_LOOK], env=env, capture_output=True, timeout=60, check=True)
    seen = json.loads(done.stdout)
    assert seen["secret_in_block"] is False and seen["dumpable"] == 0
    assert seen["environ_kept"] == SECRET  # os.environ (and so a script's allowlist) keeps its values
    # Nothing else was decided yet: the fence's modules are not even imported.
    assert seen["built"] is False and seen["fence_imported"] is False


def _booted(
    monkeypatch: pytest.MonkeyPatch, report: HardenReport, environ: dict[str, str] | None = None
) -> tuple[DeferredRunner, list[Mapping[str, Any]]]:
    monkeypatch.setattr(deferred, "harden_process", lambda: report)
    records: list[Mapping[str, Any]] = []
    settings = load_settings((), {"PATH": "/usr/bin:/bin", **(environ or {})})
    return DeferredRunner.boot(settings, audit=records.append), records


def test_a_failed_wipe_is_announced_at_boot_and_only_once(monkeypatch: pytest.MonkeyPatch) -> None:
    runner, records = _booted(monkeypatch, HardenReport(scrubbed=False, nondumpable=True, detail="test"))
    assert [r["reason"] for r in records] == ["environ-unscrubbed"]  # before anything was built
    assert not runner.built
    built = runner.get()
    assert built.harden is not None and not built.harden.scrubbed  # the runner knows the boot fact
    assert [r["reason"] for r in records] == ["environ-unscrubbed"]  # building did not repeat it


def test_a_wipe_that_worked_announces_nothing(monkeypatch: pytest.MonkeyPatch) -> None:  # positive control
    runner, records = _booted(monkeypatch, HardenReport(scrubbed=True, nondumpable=True))
    runner.get()
    assert records == []


def test_the_runner_is_built_once_for_every_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    runner, _ = _booted(monkeypatch, HardenReport(scrubbed=True, nondumpable=True))
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(runner.get())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(seen) == 8 and all(r is seen[0] for r in seen) and runner.get() is seen[0]


def test_stopping_a_runner_never_built_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    runner, _ = _booted(monkeypatch, HardenReport(scrubbed=True, nondumpable=True))
    runner.stop_running()
    assert not runner.built


def test_script_states_answer_like_the_runner_they_build(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    skill = make_skill(
        root, "s", {"x.py": "print(1)\n", "y.rb": "1\n"}, run=[ScriptDecl("x.py", "python"), ScriptDecl("y.rb", "ruby")]
    )
    catalog = catalog_of(skill)
    runner, _ = _booted(monkeypatch, HardenReport(scrubbed=True, nondumpable=True))
    states = runner.states(lambda: catalog)
    assert not runner.built
    answered = (states.grant(), states.scripts(skill), states.skill_extras(skill), states.problems())
    assert runner.built
    direct = runner.get().states(lambda: catalog)
    assert answered == (direct.grant(), direct.scripts(skill), direct.skill_extras(skill), direct.problems())
    assert [s["state"] for s in answered[1]] == ["runnable", "interpreter-unavailable"]  # interpreters resolved
    assert [u["script"] for u in answered[2]["unavailableScripts"]] == ["y.rb"]
