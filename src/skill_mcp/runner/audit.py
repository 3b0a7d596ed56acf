"""The per-run audit line and the "this machine looks fenced" note.

One JSON object per run on stderr: skill, script, argv, the NAMES of the variables handed
(never a value), exit status, duration, truncation. Stdout belongs to the protocol.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.runner.types import RunPlan, RunResult

AuditSink = Callable[[Mapping[str, Any]], None]

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
# nftables tables that mark an egress fence (the appliance's ruleset uses one of these names).
FENCE_TABLE_HINTS = ("egress", "skill_mcp", "skill-mcp")
FENCED_NOTE = (
    "this machine looks fenced (an egress proxy or nftables table is present): a host that is not "
    "on the allowlist shows up inside a script either as an HTTP 403 from the loopback proxy or as "
    "a plain timeout, and the two look the same from inside the script"
)


def _on_a_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def stderr_sink(record: Mapping[str, Any]) -> None:
    """Write one line in the shape of ``skill_mcp.logs`` (ts, level, logger, msg + fields; plain
    text when stderr is a terminal, as those logs are).

    Written directly rather than through ``logging``: the audit line is due for every run whatever
    ``SKILL_MCP_LOG`` says, and a level filter must never drop it.
    """
    if _on_a_terminal(sys.stderr):
        # A person reads it live: the shape of ``skill_mcp.logs``' text lines, not a wall of JSON.
        fields = " ".join(f"{k}={v}" for k, v in record.items() if k not in ("event", "detail"))
        level = "warning" if record.get("event") == "warning" else "info"
        head = str(record.get("detail") or record.get("event", "audit"))
        sys.stderr.write(f"skill-mcp {level}: {head} {fields}".rstrip() + "\n")
        sys.stderr.flush()
        return
    now = time.time()
    line = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z",
        "level": "warning" if record.get("event") == "warning" else "info",
        "logger": "skill_mcp.audit",
        "msg": str(record.get("event", "audit")),
        **record,
    }
    sys.stderr.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    sys.stderr.flush()


def audit_record(
    plan: RunPlan, result: RunResult | None, *, spawner: str, refused: str | None = None
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "event": "skill_run",
        "skill": plan.skill,
        "script": plan.script,
        "argv": list(plan.argv),
        "env": list(plan.env_names),
        "spawner": spawner,
        "scriptDigest": plan.script_digest,
    }
    if result is not None:
        record.update(
            status=result.status,
            exitCode=result.exit_code,
            signal=result.signal,
            durationMs=result.duration_ms,
            truncated={"stdout": result.truncated_stdout, "stderr": result.truncated_stderr},
            droppedBytes=result.dropped_bytes,
        )
    if refused is not None:
        record["refused"] = refused
    return record


def _nft_tables() -> list[str]:
    nft = shutil.which("nft", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if nft is None:
        return []
    try:
        done = subprocess.run(
            [nft, "list", "tables"], capture_output=True, timeout=2, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:  # unprivileged: nft cannot list; the proxy variable is the signal then
        return []
    return [line.split()[-1] for line in done.stdout.decode(errors="replace").splitlines() if line.strip()]


def looks_fenced(environ: Mapping[str, str], tables: Callable[[], list[str]] = _nft_tables) -> bool:
    """True when a proxy variable is set or an nftables egress table is present (asked once per Runner)."""
    if any(environ.get(name) for name in PROXY_VARS):
        return True
    return any(hint in table.lower() for table in tables() for hint in FENCE_TABLE_HINTS)
