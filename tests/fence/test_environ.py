"""The server's own secrets: a same-uid script cannot read /proc/<server>/environ or /mem.

The server runs as ``nobody`` here (setpriv), because root passes every /proc permission check
and would prove nothing. The "plain" run is the positive control: the same probe, against a
server that skipped the hardening, does read the secret, so the test can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.runner.environ import env_block, harden_process

SECRET = "PROBE-hunter2-9f8e7d"
NOBODY = 65534
HARNESS = Path(__file__).with_name("environ_server.py")

PROBE = r'''
import json, sys
pid = sys.argv[1]
out = {}
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
'''


def _python_for_nobody() -> tuple[str, str] | None:
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        return None
    pythonpath = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    for candidate in (sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3"):
        probe = subprocess.run([setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", candidate,
                                "-c", "import anyio, skill_mcp.runner.fence, subprocess, sys; "
                                "subprocess.run([sys.executable, '-c', ''], check=True)"],
                               env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"}, capture_output=True,
                               timeout=30, check=False)
        if probe.returncode == 0:
            return candidate, pythonpath
    return None


def serve_as_nobody(root: Path, mode: str) -> dict[str, Any]:
    found = _python_for_nobody()
    if found is None:
        pytest.skip("needs root, setpriv and a Python the unprivileged user can run")
    python, pythonpath = found
    probe_dir = root / "probe"
    probe_dir.mkdir()
    (probe_dir / "probe.py").write_text(PROBE, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath, "PROBE_SECRET": SECRET}
    done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python,
                           str(HARNESS), mode, str(root)], env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report = json.loads(done.stdout)
    assert report["environ_still_there"] == SECRET  # os.environ keeps every value
    return dict(report, probe=json.loads(report["result"]["stdout"]))


def test_a_same_uid_script_cannot_read_the_server_environ_or_mem(root: Path) -> None:
    probe = serve_as_nobody(root, "hardened")["probe"]
    assert SECRET not in probe.get("environ", "") and SECRET not in probe.get("mem", "")
    assert "mem_opened" not in probe  # non-dumpable: /proc/<pid>/mem cannot even be opened


def test_positive_control_an_unhardened_server_leaks_to_the_same_probe(root: Path) -> None:
    probe = serve_as_nobody(root, "plain")["probe"]
    assert SECRET in probe["environ"] and SECRET in probe["mem"]


def test_env_block_parses_a_command_name_with_spaces_and_parens() -> None:
    fields = ["S"] + [str(i) for i in range(4, 53)]
    text = "123 (a) b (c)) " + " ".join(fields)
    assert env_block(text) == (50, 51)


def test_harden_keeps_os_environ_and_blanks_the_block_in_a_child() -> None:
    code = ("import os\nfrom skill_mcp.runner.environ import harden_process\nr = harden_process()\n"
            "blk = open('/proc/self/environ', 'rb').read()\n"
            "print(r.ok, os.environ['PROBE_SECRET'], b'PROBE' in blk, len(blk) > 0)\n")
    env = {**os.environ, "PROBE_SECRET": SECRET}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30, check=True)
    assert out.stdout.decode().split() == ["True", SECRET, "False", "True"]
    assert callable(harden_process)
