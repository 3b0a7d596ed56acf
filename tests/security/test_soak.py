"""Soak: 2,000 mixed tool calls and 200 script runs in one appliance session.

After a warm-up (the first 10%), the server's resident memory may grow by at most 10% and its
open descriptors not at all; after every run and at the end zero processes of the script uid
remain. Figures are read through psutil from the host, as root (the server is non-dumpable
inside), and written to build/security/soak.json for the report.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.security.appliance import PROBE_SKILL, SCRIPT_UID, AppServer

pytestmark = [pytest.mark.appliance, pytest.mark.slow]
CALLS, RUNS = 2000, 200
WARMUP = 0.1
FIGURES = Path(__file__).resolve().parents[2] / "build" / "security" / "soak.json"
RUN_MODES = (
    ["echo", "x"],
    ["zombie"],
    ["background"],
    ["doublefork"],
    ["flood", "200000"],
    ["id"],
    ["setsid"],
    ["weird"],
    ["env"],
    ["echo", "$(id)"],
)


def _mixed_call(app: AppServer, i: int, tools: list[str]) -> None:
    kind = i % 6
    if kind == 0:
        assert app.session.portal.call(app.session.client.list_tools).tools
        return
    if kind == 1:
        err, out = app.session.call("skill_list", {})
        assert not err and out["skills"]
    elif kind == 2:
        err, out = app.session.call("skill_load", {"name": PROBE_SKILL})
        assert not err
    elif kind == 3:
        err, out = app.session.call("skill_file", {"name": PROBE_SKILL, "paths": ["SKILL.md", "scripts/probe.py"]})
        assert not err
    elif kind == 4:  # refusals are calls too: they must not leak either
        err, out = app.session.preview(PROBE_SKILL, "../other/x.py" if i % 2 else "SKILL.md")
        assert err and out["reason"] == "undeclared-script"
    elif "skill_search" in tools:
        err, out = app.session.call("skill_search", {"query": "probe hostile script"})
        assert not err
    else:
        err, out = app.session.call("skill_load", {"name": "nonexistent"})
        assert err


def _sample(app: AppServer) -> dict[str, int]:
    server = psutil.Process(app.server_pid())
    return {"rss_kB": server.memory_info().rss // 1024, "fds": server.num_fds()}


def test_soak_two_thousand_calls_and_two_hundred_runs(app: AppServer) -> None:
    tools = [t.name for t in app.session.portal.call(app.session.client.list_tools).tools]
    started = time.monotonic()
    runs = calls = 0
    warm: dict[str, int] | None = None
    peak_rss = 0
    per_run = CALLS // RUNS
    while calls < CALLS or runs < RUNS:
        for _ in range(per_run):
            if calls < CALLS:
                _mixed_call(app, calls, tools)
                calls += 1
        if runs < RUNS:
            err, out = app.session.run(PROBE_SKILL, "scripts/probe.py", RUN_MODES[runs % len(RUN_MODES)])
            assert not err and out["status"] == "ok", out
            runs += 1
            assert app.of_uid(SCRIPT_UID) == []  # after every run, not only at the end
        if warm is None and calls >= CALLS * WARMUP and runs >= RUNS * WARMUP:
            warm = _sample(app)
        peak_rss = max(peak_rss, _sample(app)["rss_kB"]) if calls % 100 == 0 else peak_rss
    end = _sample(app)
    assert warm is not None
    figures: dict[str, Any] = {
        "calls": calls,
        "runs": runs,
        "seconds": round(time.monotonic() - started, 1),
        "rss_kB_after_warmup": warm["rss_kB"],
        "rss_kB_end": end["rss_kB"],
        "rss_kB_peak_sampled": peak_rss,
        "rss_growth_pct": round(100 * (end["rss_kB"] - warm["rss_kB"]) / warm["rss_kB"], 2),
        "fds_after_warmup": warm["fds"],
        "fds_end": end["fds"],
        "script_uid_processes_end": len(app.of_uid(SCRIPT_UID)),
    }
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    sys.stderr.write("soak figures: " + json.dumps(figures) + "\n")
    assert end["rss_kB"] <= warm["rss_kB"] * 1.10, figures
    assert end["fds"] <= warm["fds"], figures
    assert figures["script_uid_processes_end"] == 0
    assert app.session.answers()  # positive control: the server still answers after the soak
