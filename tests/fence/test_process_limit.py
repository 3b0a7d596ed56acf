"""A script user already at its process limit: the refusal names RLIMIT_NPROC and SKILL_MCP_SCRIPT_USER.

RLIMIT_NPROC counts every process and thread of a uid on the machine, not only this server's.
A root server drops scripts to ``nobody`` by default, which other software often runs as; with
256 of its processes already running, ``execve`` after the drop fails with EAGAIN and the run
used to say only "could not start the script: BlockingIOError: [Errno 11] Resource temporarily
unavailable". Driven as a user meets it: the real root server over stdio, the SDK's client, a
script user that really has its limit's worth of threads (started by this test, with ``setpriv``,
under a user of the test's own so nothing else shares the uid; removed after).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from skill_mcp.limits import STANDALONE
from tests.demo_skill import demo_root
from tests.serve import stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

NPROC_USER = "skillmcp-nproc"  # made by .ci/setup.d/security.sh
# Threads of one process count as processes for RLIMIT_NPROC: one holder process is enough.
HOLDER = (
    "import sys, threading, time\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)


def _account() -> pwd.struct_passwd:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv: the server drops scripts to another user only when it is root")
    try:
        return pwd.getpwnam(NPROC_USER)
    except KeyError:
        message = f"no user {NPROC_USER}: run .ci/setup.d/security.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def skills() -> Iterator[Path]:
    with demo_root("skill-mcp-nproc-") as root:
        yield root


class Holder:
    """A process of the script user holding ``count`` threads until stopped (by its own pid)."""

    def __init__(self, account: pwd.struct_passwd, count: int) -> None:
        self.proc = subprocess.Popen(
            [
                "setpriv",
                f"--reuid={account.pw_uid}",
                f"--regid={account.pw_gid}",
                "--clear-groups",
                sys.executable,
                "-I",
                "-c",
                HOLDER,
                str(count),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin"},
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == b"ready\n"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


def _params(root: Path) -> StdioServerParameters:
    return stdio_params(
        [root], {"MCP_CONFIRM_ELICITATION": "off", "SKILL_MCP_SCRIPT_USER": NPROC_USER, "PATH": "/usr/bin:/bin"}
    )


async def _run(client: Client, root: Path) -> tuple[bool, dict[str, Any]]:
    call = {"skill": "demo", "script": "scripts/echo.py", "args": [str(root / "out" / "ran")]}
    preview = await client.call_tool("skill_run", call)
    assert preview.structured_content is not None
    token = preview.structured_content["confirmToken"]
    result = await client.call_tool("skill_run", {**call, "confirmToken": token})
    assert result.structured_content is not None
    return bool(result.is_error), dict(result.structured_content)


@pytest.mark.slow
async def test_script_cannot_start_when_its_user_is_at_nproc_and_the_refusal_says_what_to_change(skills: Path) -> None:
    account = _account()
    assert STANDALONE.nproc is not None
    holder = Holder(account, STANDALONE.nproc)
    try:
        async with Client(_params(skills), mode="legacy", read_timeout_seconds=60) as client:
            err, out = await _run(client, skills)
            assert err and out["reason"] == "spawn-failed", out
            assert "RLIMIT_NPROC" in out["detail"] and "SKILL_MCP_SCRIPT_USER" in out["detail"]
            assert NPROC_USER in out["detail"] and "not only this server's" in out["detail"]
            assert (out["errno"], out["limit"], out["scriptUser"], out["nproc"]) == (
                "EAGAIN",
                "RLIMIT_NPROC",
                NPROC_USER,
                STANDALONE.nproc,
            )
            assert out["running"] >= STANDALONE.nproc
            # Positive control, same server: once the other processes are gone the script runs (the
            # demo prints what it was given; a refused spawn ran nothing at all).
            holder.stop()
            err, out = await _run(client, skills)
            assert not err and out["status"] == "ok" and json.loads(out["stdout"]) == [], out
    finally:
        holder.stop()
