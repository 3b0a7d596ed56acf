"""The server's own secrets: a same-uid script cannot read /proc/<server>/environ or /mem.

The server runs as ``nobody`` here (setpriv), because root passes every /proc permission check
and would prove nothing. The "plain" run is the positive control: the same probe, against a
server that skipped the hardening, does read the secret, so the test can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.runner.harden import env_block, harden_process
from tests.serve import SKILL_MCP, serve_argv

from .helpers import NOBODY, nobody_python

SECRET = "PROBE-hunter2-9f8e7d"
HARNESS = Path(__file__).with_name("harden_server.py")

PROBE = r"""
import json, os, sys
pid = sys.argv[1] if len(sys.argv) > 1 else str(os.getppid())
out = {"cmdline": open(f"/proc/{pid}/cmdline", "rb").read().decode("latin-1")}
try:
    out["environ"] = open(f"/proc/{pid}/environ", "rb").read().decode("latin-1")
except OSError as exc:
    out["environ_errno"] = exc.errno
try:
    with open(f"/proc/{pid}/stat") as fh:
        start, end = (int(x) for x in fh.read().rsplit(")", 1)[1].split()[47:49])
    with open(f"/proc/{pid}/mem", "rb") as mem:
        out["mem_opened"] = True
        mem.seek(start)
        out["mem"] = mem.read(end - start).decode("latin-1")
except (OSError, ValueError) as exc:
    out["mem_errno"] = getattr(exc, "errno", None) or str(exc)
print(json.dumps(out))
"""


def serve_as_nobody(root: Path, mode: str) -> dict[str, Any]:
    found = nobody_python()
    if found is None:
        pytest.skip("needs root, setpriv and a Python the unprivileged user can run")
    python, pythonpath = found
    probe_dir = root / "probe"
    probe_dir.mkdir()
    (probe_dir / "probe.py").write_text(PROBE, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath, "PROBE_SECRET": SECRET}
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, str(HARNESS), mode, str(root)],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report = json.loads(done.stdout)
    assert report["environ_still_there"] == SECRET  # os.environ keeps every value
    return dict(report, probe=json.loads(report["result"]["stdout"]))


@pytest.mark.slow
def test_a_same_uid_script_cannot_read_the_server_environ_or_mem(root: Path) -> None:
    probe = serve_as_nobody(root, "hardened")["probe"]
    assert SECRET not in probe.get("environ", "") and SECRET not in probe.get("mem", "")
    assert "mem_opened" not in probe  # non-dumpable: /proc/<pid>/mem cannot even be opened


@pytest.mark.slow
def test_a_confined_script_cannot_read_an_unhardened_servers_environ_or_mem(root: Path) -> None:
    # The sandbox alone: Landlock refuses the ptrace-guarded /proc files of any process outside
    # the script's domain, so a server whose hardening failed still keeps its secrets.
    probe = serve_as_nobody(root, "confined-only")["probe"]
    assert SECRET not in probe.get("environ", "") and SECRET not in probe.get("mem", "")
    assert probe.get("environ_errno") == 13 and "mem_opened" not in probe


def test_positive_control_an_unhardened_server_leaks_to_the_same_probe(root: Path) -> None:
    # Neither the hardening nor the sandbox: the same probe reads the secret, so the tests above can fail.
    probe = serve_as_nobody(root, "plain")["probe"]
    assert SECRET in probe["environ"] and SECRET in probe["mem"]


def test_env_block_parses_a_command_name_with_spaces_and_parens() -> None:
    fields = ["S"] + [str(i) for i in range(4, 53)]
    text = "123 (a) b (c)) " + " ".join(fields)
    assert env_block(text) == (50, 51)


def test_harden_keeps_os_environ_and_blanks_the_block_in_a_child() -> None:
    code = (
        "import os\nfrom skill_mcp.runner.harden import harden_process\nr = harden_process()\n"
        "blk = open('/proc/self/environ', 'rb').read()\n"
        "print(r.ok, os.environ['PROBE_SECRET'], b'PROBE' in blk, len(blk) > 0)\n"
    )
    env = {**os.environ, "PROBE_SECRET": SECRET}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30, check=True)
    assert out.stdout.decode().split() == ["True", SECRET, "False", "True"]
    assert callable(harden_process)


async def _real_server_probe(root: Path) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    found = nobody_python()
    if found is None:
        pytest.skip("needs root, setpriv and a Python the unprivileged user can run")
    python, pythonpath = found
    (root / "probe").mkdir()
    (root / "probe" / "probe.py").write_text(PROBE, encoding="utf-8")
    (root / "probe" / "SKILL.md").write_text(
        "---\nname: probe\ndescription: probe\nmcp-host:\n  version: 1\n  run:\n"
        "    - script: probe.py\n      interpreter: python\n---\nprobe\n",
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command="setpriv",
        args=[f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *serve_argv([root], python=python)],
        env={"PYTHONPATH": pythonpath, "PROBE_SECRET": SECRET, "SKILL_MCP_LOG": "warning"},
    )
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        first = (await client.call_tool("skill_run", {"skill": "probe", "script": "probe.py"})).structured_content
        assert first is not None
        done = await client.call_tool(
            "skill_run", {"skill": "probe", "script": "probe.py", "confirmToken": first["confirmToken"]}
        )
    assert done.structured_content is not None and done.structured_content["status"] == "ok", done
    return dict(json.loads(done.structured_content["stdout"]))


@pytest.mark.slow
def test_a_script_run_by_the_real_server_cannot_read_its_environ_or_mem(root: Path) -> None:
    import anyio

    probe = anyio.run(_real_server_probe, root)
    assert SKILL_MCP in probe["cmdline"]  # it looked at the server, not some other process
    assert SECRET not in probe.get("environ", "") and SECRET not in probe.get("mem", "")
    assert "mem_opened" not in probe
