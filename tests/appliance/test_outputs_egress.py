"""The appliance hands a run's files over safely, and says what its fence refused.

The broker, as root, reads the output directory of a run by descriptor after every process of
the script uid is gone: the script's own single-link regular files come back (the positive
control), and nothing it planted - links to ``/proc/1/environ``, to the launcher's directory or
to the other runs' directories, a FIFO, an undecodable name, a 4 KB path - makes root read
anything else. The egress report names the hosts the proxy allowed and refused and counts the
direct attempts the ruleset dropped; names and counts only.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest

from skill_mcp import outputs
from tests.appliance.conftest import Appliance

pytestmark = pytest.mark.appliance


def _run(app: Appliance, mode: str, *args: str, **kw: Any) -> dict[str, Any]:
    """Run, asking again (bounded) while an earlier run's clean-up is still going (``cleanup-pending``)."""
    reply: dict[str, Any] = {}
    for _ in range(60):
        reply = app.run(mode, *args, **kw)
        if reply.get("ok") or reply.get("reason") != "cleanup-pending":
            break
        time.sleep(1)
    assert reply.get("ok"), reply
    return reply


def test_script_cannot_make_root_read_another_file_through_its_output_directory(appliance: Appliance) -> None:
    reply = _run(appliance, "outputs")
    got = outputs.from_wire(reply["result"]["outputs"])
    by_path = {f.path: f for f in got.files}
    assert set(by_path) == {"report.md", "pixel.png", "sub/nested.csv"}  # positive control
    assert by_path["report.md"].data == b"# report\n"
    assert by_path["pixel.png"].sha256 == hashlib.sha256(by_path["pixel.png"].data).hexdigest()
    why = {d.path: d.why for d in got.dropped}
    assert why["environ"] == why["launcher"] == why["runs"] == outputs.LINK
    assert why["pipe"] == outputs.SPECIAL
    assert outputs.NAME in why.values()  # the undecodable name and the 4 KB path
    everything = b"".join(f.data for f in got.files)
    assert b"MCP_SKILL_RUN" not in everything and b"PATH=" not in everything


def test_ten_thousand_tiny_files_come_back_as_64_with_the_rest_counted(appliance: Appliance) -> None:
    reply = _run(appliance, "outputs", "many", "10000")
    got = outputs.from_wire(reply["result"]["outputs"])
    assert len(got.files) == outputs.MAX_OUTPUT_FILES
    assert got.dropped_count == 10_000 - outputs.MAX_OUTPUT_FILES


def test_the_egress_report_names_exactly_the_refused_hosts_and_counts_direct_attempts(
    appliance: Appliance, peers: dict[str, Any]
) -> None:
    reply = _run(appliance, "egress", f"{peers['web_ip']}:80", egress=("allowed.test",))
    assert "error" in reply["out"]["direct"] and "error" in reply["out"]["udp"]
    seen = reply["out"]
    assert seen["http://allowed.test/"] == {"status": 200}  # positive control: granted and reached
    assert seen["http://other.test/"] == {"status": 403}
    report = reply["result"]["egress"]
    assert report["allowed"] == ["allowed.test"]
    assert sorted(report["refused"]) == ["declared-not-granted.example", "other.test"]
    assert report["directDropped"] >= 1
    notes = " ".join(reply["result"]["notes"])
    assert "declared-not-granted.example: declared by skill probe but not granted" in notes
    assert "other.test: not declared by skill probe" in notes
    assert "http://" not in repr(report)


def test_a_run_that_reaches_nothing_reports_nothing_refused(appliance: Appliance) -> None:
    reply = _run(appliance, "id")
    report = reply["result"]["egress"]
    assert report["allowed"] == [] and report["refused"] == [] and report["directDropped"] == 0
