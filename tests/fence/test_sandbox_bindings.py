"""The sandbox's bindings as a table: each rule, the call it denies, and the errno in a child.

Each child (``sandbox_probe.py``) applies ``confine.apply`` to itself and tries the calls; the
same calls in an unconfined child are the positive control, so every row can fail. Loopback
listeners are the test's own.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skill_mcp import confine, landlock, limits, sandbox_rules

PROBE = Path(__file__).with_name("sandbox_probe.py")

pytestmark = pytest.mark.skipif(not Path("/proc/self").exists(), reason="Linux only")


def _kernel_can() -> bool:
    try:
        confine.probe(sandbox_rules.MIN_LANDLOCK_ABI)
    except confine.SandboxUnavailable:
        return False
    return True


needs_sandbox = pytest.mark.skipif(not _kernel_can(), reason="this kernel cannot confine a run")


def probe(rules: sandbox_rules.Sandbox | None, *calls: str) -> dict[str, int]:
    wire = json.dumps(rules.wire() if rules is not None else None)
    done = subprocess.run([sys.executable, str(PROBE), wire, *calls], capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    result: dict[str, int] = json.loads(done.stdout)
    return result


@pytest.fixture()
def dirs() -> Iterator[dict[str, Path]]:
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-sandbox-"))
    made = {name: base / name for name in ("skill", "other", "run", "data", "outside")}
    for path in made.values():
        path.mkdir()
        (path / "file").write_text("x", encoding="utf-8")
    try:
        yield made
    finally:
        subprocess.run(["rm", "-rf", "--", str(base)], check=False)


@pytest.fixture()
def listener() -> Iterator[int]:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        yield srv.getsockname()[1]


def standalone(d: dict[str, Path], *, egress: bool, data: bool = False) -> sandbox_rules.Sandbox:
    return sandbox_rules.standalone_sandbox(
        skill_dir=str(d["skill"]),
        run_dir=str(d["run"]),
        interpreters=limits.find_interpreters().values(),
        data_dir=str(d["data"]) if data else None,
        egress=egress,
    )


DENIED_EPERM = (
    "shmget",
    "msgget",
    "semget",
    "mq_open",
    "io_uring_setup",
    "ptrace",
    "unshare",
    "clone_newuser",
    "keyctl",
    "bpf",
    "userfaultfd",
    "socket_unix",
    "socket_netlink",
)


@needs_sandbox
def test_a_confined_process_cannot_make_ipc_io_uring_namespaces_or_trace(dirs: dict[str, Path]) -> None:
    got = probe(standalone(dirs, egress=True), *DENIED_EPERM, "clone3", "fork", "socketpair", "socket_inet")
    assert {call: got[call] for call in DENIED_EPERM} == dict.fromkeys(DENIED_EPERM, errno.EPERM)
    assert got["clone3"] == errno.ENOSYS  # so libc falls back to clone, whose flags the filter reads
    # Positive controls in the same child: a plain fork, a socketpair, an IPv4 socket (egress declared).
    assert (got["fork"], got["socketpair"], got["socket_inet"]) == (0, 0, 0)


def test_positive_control_an_unconfined_process_makes_the_same_calls() -> None:
    got = probe(None, "shmget", "socket_unix", "clone3", "signal_parent")
    assert got["shmget"] == 0 and got["socket_unix"] == 0 and got["signal_parent"] == 0
    assert got["clone3"] != errno.ENOSYS  # the kernel has clone3: EFAULT/EINVAL for the NULL argument


@needs_sandbox
def test_a_confined_process_reads_only_the_runtime_and_its_skill(dirs: dict[str, Path]) -> None:
    got = probe(
        standalone(dirs, egress=False),
        f"read:{dirs['other']}/file",
        f"read:{dirs['outside']}/file",
        f"read:{dirs['skill']}/file",
        f"read:{dirs['run']}/file",
        "read:/etc/passwd",
        "read:/dev/urandom",
    )
    assert got[f"read:{dirs['other']}/file"] == got[f"read:{dirs['outside']}/file"] == errno.EACCES
    assert got[f"read:{dirs['skill']}/file"] == got[f"read:{dirs['run']}/file"] == 0
    assert got["read:/etc/passwd"] == got["read:/dev/urandom"] == 0


@needs_sandbox
def test_a_confined_process_writes_only_its_run_directory_and_the_data_directory(dirs: dict[str, Path]) -> None:
    calls = [f"write:{dirs[n]}/new" for n in ("skill", "outside", "run", "data")] + ["write:/dev/null"]
    got = probe(standalone(dirs, egress=False, data=True), *calls)
    assert got[f"write:{dirs['skill']}/new"] == got[f"write:{dirs['outside']}/new"] == errno.EACCES
    assert got[f"write:{dirs['run']}/new"] == got[f"write:{dirs['data']}/new"] == got["write:/dev/null"] == 0
    # Without MCP_DATA_DIR the same directory is like any other.
    assert (
        probe(standalone(dirs, egress=False), f"write:{dirs['data']}/again")[f"write:{dirs['data']}/again"]
        == errno.EACCES
    )


@needs_sandbox
def test_a_confined_process_without_egress_opens_no_socket_but_a_socketpair(
    dirs: dict[str, Path], listener: int
) -> None:
    got = probe(standalone(dirs, egress=False), f"connect:{listener}", "socket_udp", "socketpair")
    assert got[f"connect:{listener}"] == got["socket_udp"] == errno.EPERM
    assert got["socketpair"] == 0
    assert probe(standalone(dirs, egress=True), f"connect:{listener}")[f"connect:{listener}"] == 0  # declared egress


@needs_sandbox
def test_an_appliance_sandbox_connects_to_the_proxy_port_only_and_binds_none(
    dirs: dict[str, Path], listener: int
) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        elsewhere = other.getsockname()[1]
        rules = sandbox_rules.appliance_sandbox(
            skill_dir=str(dirs["skill"]),
            scratch=str(dirs["run"]),
            interpreters=limits.find_interpreters().values(),
            proxy_port=listener,
        )
        got = probe(rules, f"connect:{listener}", f"connect:{elsewhere}", "bind")
    assert got[f"connect:{elsewhere}"] == got["bind"] == errno.EACCES
    assert got[f"connect:{listener}"] == 0


@needs_sandbox
def test_a_confined_process_cannot_signal_outside_its_run(dirs: dict[str, Path]) -> None:
    if landlock.abi_version() < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    assert probe(standalone(dirs, egress=False), "signal_parent")["signal_parent"] == errno.EPERM


@needs_sandbox
def test_a_required_path_that_is_missing_fails_the_apply_instead_of_running_unconfined(dirs: dict[str, Path]) -> None:
    rules = sandbox_rules.standalone_sandbox(
        skill_dir=str(dirs["skill"] / "gone"), run_dir=str(dirs["run"]), interpreters=(), data_dir=None, egress=False
    )
    done = subprocess.run(
        [sys.executable, str(PROBE), json.dumps(rules.wire()), "fork"], capture_output=True, timeout=60, check=False
    )
    assert done.returncode != 0 and b"FileNotFoundError" in done.stderr


def test_the_filter_exports_its_rules_for_inspection(dirs: dict[str, Path]) -> None:
    text = confine.build_filter(standalone(dirs, egress=False)).pfc()
    for call in ("shmget", "io_uring_setup", "socket", "clone3", "ptrace", "keyctl"):
        assert f'"{call}"' in text
    assert "ERRNO(38)" in text and "ERRNO(1)" in text  # clone3's ENOSYS beside the EPERMs


def test_the_landlock_rights_degrade_per_abi_as_the_kernel_sample_does() -> None:
    rows: list[tuple[int, int, int, int]] = [
        (1, landlock.FS_ABI1, 0, 0),
        (2, landlock.FS_ABI1 | landlock.FS_REFER, 0, 0),
        (3, landlock.FS_ABI1 | landlock.FS_REFER | landlock.FS_TRUNCATE, 0, 0),
        (4, landlock.FS_ABI1 | landlock.FS_REFER | landlock.FS_TRUNCATE, 3, 0),
        (5, landlock.FS_ALL, 3, 0),
        (6, landlock.FS_ALL, 3, 3),
        (7, landlock.FS_ALL, 3, 3),
    ]
    for abi, fs, net, scoped in rows:
        assert (landlock.fs_rights(abi), landlock.net_rights(abi), landlock.scopes(abi)) == (fs, net, scoped), abi


def test_interpreter_prefixes_are_the_installation_roots() -> None:
    assert sandbox_rules.interpreter_prefixes(
        ["/opt/x/bin/python3.11", "/usr/bin/node", "/opt/x/bin/node", "/weird/node"]
    ) == ("/opt/x", "/usr", "/weird")


def test_nothing_a_declaration_says_but_egress_changes_the_rules() -> None:
    common: dict[str, Any] = {
        "skill_dir": "/s",
        "run_dir": "/r",
        "interpreters": ("/usr/bin/python3",),
        "data_dir": None,
    }
    closed, open_ = (
        sandbox_rules.standalone_sandbox(**common, egress=False),
        sandbox_rules.standalone_sandbox(**common, egress=True),
    )
    assert closed.paths == open_.paths and (closed.tcp_connect, closed.inet) == ((), False)
    assert (open_.tcp_connect, open_.inet) == (None, True)
    writable = [p for p, level, _ in closed.paths if level == sandbox_rules.WRITE_ALL]
    assert writable == ["/r"]
    for forbidden in ("/tmp", "/dev/shm", "/var/tmp", "/run", os.path.expanduser("~")):
        assert all(not p.startswith(forbidden) or p in ("/r",) for p, _, _ in closed.paths), forbidden
