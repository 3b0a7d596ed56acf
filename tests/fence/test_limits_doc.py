"""docs/fence.md's limits table says what the code holds, row by row, for both modes: the
numbers from ``skill_mcp.limits``, the appliance's script identity from the launcher."""

from __future__ import annotations

import re
import resource

from skill_mcp import limits, outputs, sandbox_rules
from skill_mcp_launcher import procs
from tests.fence.limits_table import DOC, REPO, documented_table


def expected_rows() -> dict[str, tuple[str, str]]:
    """Every row whose values come from code, spelled as the table spells them."""
    kib = 1024
    args = f"{limits.MAX_ARGS}, each {limits.MAX_ARG_CHARS // kib} KiB, {limits.MAX_ARGS_TOTAL_CHARS // kib} KiB in all"
    interpreters = f"{', '.join(limits.KNOWN)} on {limits.FIXED_PATH}"
    per_run = (
        f"{outputs.MAX_OUTPUT_FILES} files, {outputs.MAX_OUTPUT_BYTES // limits.MIB} MiB (the rest reported as dropped)"
    )
    kept = f"{outputs.RETAIN_S // 60} min, {outputs.RETAIN_BYTES // limits.MIB} MiB across runs, oldest first out"
    return {
        **limits.limits_table(),
        "arguments": (args, args),
        "interpreters": (interpreters, interpreters),
        "outputs per run": (per_run, per_run),
        "outputs kept": (kept, kept),
    }


def test_docs_limits_table_matches_the_code() -> None:
    documented = documented_table()
    assert {k: documented.get(k) for k in expected_rows()} == expected_rows()


def test_the_appliance_script_identity_is_the_launchers() -> None:
    name, uid = procs.SCRIPT_USER
    assert documented_table()["script uid"][1].startswith(f"{name} ({uid})")


def test_every_module_the_table_names_exists() -> None:
    named = set()
    for standalone, appliance in documented_table().values():
        named |= set(re.findall(r"`([\w/]+\.py)`", standalone + appliance))
    assert named  # positive control: the table does point at code
    missing = [
        n for n in sorted(named) if not (REPO / "src" / n).exists() and not (REPO / "src/skill_mcp" / n).exists()
    ]
    assert missing == []


def test_a_changed_number_in_the_table_is_caught() -> None:
    # Positive control for the comparison: the same check on a table with one edited cell fails.
    text = DOC.read_text(encoding="utf-8").replace(
        "| RLIMIT_NPROC | 256 (only when dropped from root) | 64 |",
        "| RLIMIT_NPROC | 256 (only when dropped from root) | 65 |",
    )
    edited = documented_table(text)
    assert edited["RLIMIT_NPROC"] != expected_rows()["RLIMIT_NPROC"]


def test_the_table_reads_the_values_both_sides_apply() -> None:
    # The module's table is built from the very Limits objects the spawners use, so a changed
    # limit changes a row.
    appliance = dict(limits.APPLIANCE.pairs())
    assert appliance[resource.RLIMIT_NPROC] == 64 and limits.limits_table()["RLIMIT_NPROC"][1] == "64"
    changed = limits.Limits(nproc=65, nofile=256, fsize=1, address_space=None)
    assert dict(changed.pairs())[resource.RLIMIT_NPROC] == 65 and resource.RLIMIT_AS not in dict(changed.pairs())


def test_standalone_and_broker_share_one_interpreter_set_and_capture_bound() -> None:
    from skill_mcp.runner import interpreters, types
    from skill_mcp_launcher import sandbox

    assert interpreters.CANDIDATES is limits.CANDIDATES and types.CAPTURE_LIMIT == limits.CAPTURE_LIMIT
    assert sandbox.Capture is limits.Capture and sandbox.Limits is limits.Limits


def test_the_sandbox_rows_name_the_port_the_launchers_proxy_listens_on() -> None:
    from skill_mcp_launcher import proxy

    assert proxy.PROXY_PORT == limits.PROXY_PORT
    assert documented_table()["sandbox: TCP"][1] == f"connect to port {proxy.PROXY_PORT} only; no bind"


def test_a_changed_sandbox_rule_in_the_table_is_caught() -> None:
    # Positive control for the sandbox rows: an edited rule no longer matches the code's.
    text = DOC.read_text(encoding="utf-8").replace("connect to port 8888 only", "connect to port 8080 only")
    assert documented_table(text)["sandbox: TCP"] != expected_rows()["sandbox: TCP"]
    assert sandbox_rules.sandbox_table(8080)["sandbox: TCP"] == documented_table(text)["sandbox: TCP"]
