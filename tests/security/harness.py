"""Drive the real server with the SDK's own client, synchronously, for the security suite.

A ``Session`` holds one ``mcp.Client`` over stdio inside an anyio blocking portal, so a
module-scoped fixture can keep one server for many denials (each test still checks that the
server answers afterwards). ``run`` performs the whole confirmation: with
``MCP_CONFIRM_ELICITATION=off`` the first call must return ``confirmation-required`` and start
nothing; the repeat call with the token runs the script once.

The script uid: a root server drops scripts to ``SKILL_MCP_SCRIPT_USER``, a user of the suite's
own (``skillmcp-sectest``, made by ``.ci/setup.d/security.sh``; ``nobody`` where it is missing).
That uid is still shared - with another run of this suite, or with other suites when it is
``nobody`` - so "no process of the script uid survives" is judged only over the processes this
run started: every server gets ``RUNS_TMP`` as its temporary directory, each run's own ``TMPDIR``
is made inside it, and a process is this run's exactly when its ``TMPDIR`` lies there (whatever
session it made of its own, whoever its parent is now). Nothing here waits on, or kills, a
process of the uid that some other test started.
"""

from __future__ import annotations

import atexit
import json
import os
import pwd
import shutil
import signal
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters

from tests.serve import stdio_params

SCRIPT_USER = "skillmcp-sectest"
FALLBACK_USER = "nobody"
# The temporary directory of every server this run of the suite starts (``TMPDIR`` in its
# environment): the servers make each run's directory in it. Reachable by the script user, who
# owns its run's directory inside; removed when the test process exits (collected or run).
RUNS_TMP = Path(tempfile.mkdtemp(prefix="skill-mcp-sec-runs-"))
RUNS_TMP.chmod(0o755)
atexit.register(shutil.rmtree, RUNS_TMP, True)


def script_account() -> pwd.struct_passwd | None:
    """The account scripts run as when the test server is root; ``None`` when not root."""
    if os.geteuid() != 0:
        return None
    for name in (SCRIPT_USER, FALLBACK_USER):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("no unprivileged script user: run .ci/setup.d/security.sh")


def _started_here(pid: int) -> bool:
    """Whether the process's ``TMPDIR`` is a run directory of this run's servers (``RUNS_TMP``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
    except OSError:
        return False
    tmpdir = env.get(b"TMPDIR", b"").decode(errors="replace")
    return Path(tmpdir).parent == RUNS_TMP


def procs_of_uid(uid: int) -> list[dict[str, Any]]:
    """The live processes of real uid ``uid`` that this run's servers started (marked by state).

    A zombie has no environment left to read, so it is not counted: it runs nothing and holds
    nothing but its pid (the zombie test counts the server's children directly).
    """
    out = []
    for proc in psutil.process_iter(["uids", "status", "name"]):
        if proc.info["uids"] is not None and proc.info["uids"].real == uid and _started_here(proc.pid):
            state = "Z" if proc.info["status"] == psutil.STATUS_ZOMBIE else (proc.info["status"] or "?")[:1].upper()
            out.append({"pid": proc.pid, "state": state, "name": proc.info["name"]})
    return out


def zombies_of_uid(uid: int) -> list[int]:
    """The zombies of real uid ``uid``, whoever started them (a zombie's environment is gone)."""
    return [
        proc.pid
        for proc in psutil.process_iter(["uids", "status"])
        if proc.info["uids"] is not None
        and proc.info["uids"].real == uid
        and proc.info["status"] == psutil.STATUS_ZOMBIE
    ]


def kill_uid(uid: int) -> None:
    """Clean-up after a test that proved a survivor: SIGKILL the processes of ``uid`` (never root)
    that this run's servers started, and no other process of that uid."""
    assert uid != 0
    for proc in procs_of_uid(uid):
        try:
            os.kill(proc["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass


def last_json(text: str) -> Any:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


@dataclass
class Session:
    portal: BlockingPortal
    client: Client
    calls: int = 0
    skill: str = "sec"  # the skill ``probe`` runs: the standalone trap tree's, or the appliance's shared probe
    tool_names: list[str] = field(default_factory=list)

    def call(self, tool: str, arguments: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        self.calls += 1
        result = self.portal.call(self.client.call_tool, tool, dict(arguments))
        if result.structured_content is None:
            text = "".join(getattr(c, "text", "") for c in result.content)
            return bool(result.is_error), {"text": text}
        return bool(result.is_error), dict(result.structured_content)

    def preview(self, skill: str, script: str, args: Sequence[str] = ()) -> tuple[bool, dict[str, Any]]:
        return self.call("skill_run", {"skill": skill, "script": script, "args": list(args)})

    def run(self, skill: str, script: str, args: Sequence[str] = ()) -> tuple[bool, dict[str, Any]]:
        """Preview then confirm with the token; a refusal at preview time is returned as is."""
        err, first = self.preview(skill, script, args)
        if err or first.get("status") != "confirmation-required":
            return err, first
        return self.call(
            "skill_run", {"skill": skill, "script": script, "args": list(args), "confirmToken": first["confirmToken"]}
        )

    def probe(
        self, mode: str, *args: str, skill: str | None = None, script: str = "scripts/probe.py"
    ) -> dict[str, Any]:
        """Run the probe and return its result with the probe's JSON parsed in as ``out``."""
        err, result = self.run(skill or self.skill, script, [mode, *args])
        assert not err, result
        result["out"] = last_json(result.get("stdout", ""))
        return result

    def answers(self) -> bool:
        """The server still answers a real request (the liveness check every test ends with)."""
        tools = self.portal.call(self.client.list_tools)
        err, listing = self.call("skill_list", {})
        return bool(tools.tools) and not err and "skills" in listing


def server_params(roots: Sequence[Path], env: Mapping[str, str]) -> StdioServerParameters:
    """``skill-mcp serve`` over stdio (the one scaffold, ``tests/serve.py``) with the suite's environment."""
    return stdio_params(roots, env)


@contextmanager
def open_session(
    params: StdioServerParameters, mode: str = "legacy", read_timeout: float = 120, skill: str = "sec"
) -> Iterator[Session]:
    with ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal("asyncio"))
        client = portal.call(lambda: Client(params, mode=mode, read_timeout_seconds=read_timeout))
        stack.enter_context(portal.wrap_async_context_manager(client))
        yield Session(portal=portal, client=client, skill=skill)


def announced(marker: Path, timeout: float = 20.0) -> dict[str, Any]:
    """What the probe run whose arguments name ``marker`` announced (``probe.py``'s ``_announce``).

    A run's sandbox lets it write only its own run directory, so the probe leaves its pid there;
    the test finds the process by its command line and reads the file through its ``TMPDIR``
    (``/proc/<pid>/environ``: the test is root or the script's own uid). A bounded poll.
    """
    import time

    wanted = str(marker).encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in psutil.process_iter(["pid"]):
            try:
                with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
                    if wanted not in fh.read().split(b"\0"):
                        continue
                with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                    env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
                note = Path(env[b"TMPDIR"].decode()) / "announce.json"
                if note.exists():
                    info: dict[str, Any] = json.loads(note.read_text(encoding="utf-8"))
                    return info
            except (OSError, KeyError, ValueError):
                continue
        time.sleep(0.05)
    raise AssertionError(f"no run naming {marker} announced itself within {timeout} s")
