"""The catalog built on first use: once, shared, and kept out of the cyclic collector's way.

``kept_for_life`` changes process-wide collector state, so each test runs it in a child
interpreter and reads what it saw there (this test process's own collector is left alone).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import write_skill

PROBE = r"""
import gc, json, sys, threading
from skill_mcp.catalog.lazy import LazyCatalog, kept_for_life
from skill_mcp.config import load_settings

settings = load_settings([sys.argv[1]], {"SKILL_MCP_CACHE": "off"})
lazy = LazyCatalog(settings)
seen = {}

def build_and_look():
    from skill_mcp.catalog.discover import build_catalog
    seen["enabled_during_build"] = gc.isenabled()
    return build_catalog(settings)

if sys.argv[2] == "disabled-before":
    gc.disable()
frozen_before = gc.get_freeze_count()
# Collections started between the build's return and kept_for_life's return: none may walk
# the records the build made.
marks = {}
after_build = []
gc.callbacks.append(lambda phase, info: after_build.append(info) if phase == "start" and marks else None)
ballast = []

def build_then_mark():
    catalog = build_and_look()
    # Live objects past the youngest generation's threshold, as a large catalog leaves.
    ballast.extend([] for _ in range(5 * gc.get_threshold()[0]))
    marks["built"] = True
    return catalog

catalog = kept_for_life(build_then_mark)
out = {"skills": sorted(catalog.skills), "enabled_after": gc.isenabled(),
       "frozen_grew": gc.get_freeze_count() > frozen_before,
       "collections_after_build": len(after_build), **seen}
# Concurrent first callers share one build.
results = []
threads = [threading.Thread(target=lambda: results.append(lazy())) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
out["one_build"] = len({id(c) for c in results}) == 1 and lazy() is results[0]
print(json.dumps(out))
"""


def _probe(root: Path, mode: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(root), mode], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout))


def test_the_collector_pauses_for_the_build_and_the_records_are_frozen_after(tmp_path: Path) -> None:
    for name in ("alpha", "beta"):
        write_skill(tmp_path, name)
    seen = _probe(tmp_path, "enabled-before")
    assert seen["skills"] == ["alpha", "beta"] and seen["one_build"]
    assert seen["enabled_during_build"] is False
    assert seen["enabled_after"] is True and seen["frozen_grew"] is True
    assert seen["collections_after_build"] == 0


def test_a_collector_someone_else_turned_off_stays_off(tmp_path: Path) -> None:
    write_skill(tmp_path, "alpha")
    seen = _probe(tmp_path, "disabled-before")
    assert seen["enabled_after"] is False and seen["skills"] == ["alpha"]
