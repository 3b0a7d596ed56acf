"""How the benchmark starts a server and finds its process: one place, used for both servers.

Both servers are started through the SDK's own stdio client (``StdioServerParameters``) with
the same interpreter and the same environment, so whatever differs between them is the server.
"""

from __future__ import annotations

import gc
import sys
import time
import warnings
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

CALL_TIMEOUT_S = 120.0  # a 10,000-skill scan on a slow disk still answers well within this
FLOOR_FILE = Path(__file__).with_name("floor.py")
STDERR_LOG = Path("/tmp/skill-mcp-bench/server-stderr.log")


@dataclass(frozen=True, slots=True)
class ServerSpec:
    label: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    def params(self, extra_env: Mapping[str, str] | None = None) -> StdioServerParameters:
        env = {"SKILL_MCP_LOG": "warning", **self.env, **(extra_env or {})}
        return StdioServerParameters(command=self.command[0], args=list(self.command[1:]), env=env)


def floor_spec() -> ServerSpec:
    return ServerSpec("floor", (sys.executable, str(FLOOR_FILE)))


def transport_floor_spec() -> ServerSpec:
    """The floor's trivial server on skill-mcp's stdio transport (see ``bench.floor``)."""
    return ServerSpec("floor (skill-mcp transport)", (sys.executable, str(FLOOR_FILE), "--skill-mcp-transport"))


def ours_command() -> tuple[str, ...]:
    """``skill-mcp serve`` as installed next to this interpreter (what a client configures)."""
    script = Path(sys.executable).with_name("skill-mcp")
    if script.exists():
        return (str(script), "serve")
    return (sys.executable, "-m", "skill_mcp.server")


def ours_spec(label: str, root: Path | None) -> ServerSpec:
    """Our server on ``root``, or on the bundled pack when ``root`` is None."""
    command = ours_command()
    if root is not None:
        command = (*command, "--skills-dir", str(root))
    # The SDK hands the child only a default environment (no SKILLS_DIR, no hosted markers),
    # so --skills-dir or, without it, the bundled pack decides the roots. The catalog cache is
    # off: these figures stay comparable with earlier runs (every start scans); the cold and
    # warm cache figures are bench.firstanswer's.
    return ServerSpec(label, command, {"SKILL_MCP_CACHE": "off"})


def child_pids() -> set[int]:
    """Direct children of this process (the SDK does not hand out its process)."""
    return {child.pid for child in psutil.Process().children()}


async def whole(client: Client) -> None:
    """Return once the server answers a ``ping``, which only an SDK server does: ours answers
    its first calls before its SDK is loaded and loads it after, so a figure of the whole server
    (its peak memory) is read after this, the floor's alike."""
    with warnings.catch_warnings():  # the client marks ping deprecated for a later protocol
        warnings.simplefilter("ignore")
        await client.send_ping()


def peak_rss_kib(pid: int) -> int:
    """``VmHWM`` (peak resident set) of a live process, in KiB.

    From /proc, not psutil: psutil reports the current resident set on Linux, never the peak.
    """
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for pid {pid}")


@dataclass(slots=True)
class Session:
    client: Client
    pid: int | None
    spawned_at: float  # perf_counter() just before the spawn
    initialized_at: float  # perf_counter() when the initialize result was in


@asynccontextmanager
async def session(
    spec: ServerSpec,
    extra_env: Mapping[str, str] | None = None,
    timeout_s: float = CALL_TIMEOUT_S,
    errlog_path: Path | None = None,
) -> AsyncIterator[Session]:
    """A connected, initialized client (handshake era) for ``spec``; the server ends with it.

    The server's stderr is appended to ``errlog_path`` (default: the shared ``STDERR_LOG``)."""
    before = child_pids()
    # Every server meets the same client heap: what earlier visits left is collected and frozen
    # out of the collector's reach, so a full collection of the client's (50 ms at 10,000 skills,
    # due after so many pages) does not land on whichever server happens to be walked then.
    gc.collect()
    gc.freeze()
    # Every wait is bounded by read_timeout_seconds (initialize included). No cancel scope is
    # wrapped around the enter: the client opens task groups that must outlive such a scope.
    # The server's stderr (JSON log lines, audit lines) goes to a file, not over the report.
    log = errlog_path or STDERR_LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as errlog:
        transport = stdio_client(spec.params(extra_env), errlog=errlog)
        client = Client(transport, mode="legacy", read_timeout_seconds=timeout_s, cache=None)
        spawned_at = time.perf_counter()
        async with client:  # spawn, initialize, notifications/initialized
            initialized_at = time.perf_counter()
            new = child_pids() - before
            yield Session(client, max(new) if new else None, spawned_at, initialized_at)
