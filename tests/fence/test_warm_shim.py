"""The warm shim: started ahead of a run, holding nothing of the server, used once, never leaked.

Real processes throughout: the shim the spawner starts is inspected through ``/proc`` (as root
where the kernel requires it), killed, stopped or orphaned by the test. Waits are for an
observable state under a deadline, never a sleep "to let it settle".
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import platform
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from skill_mcp.models import ScriptDecl
from skill_mcp.runner.shim import EXEC_NEXT, PACKAGE_DIR, SHIM, prctl_dir
from skill_mcp.runner.spawn_local import LocalSpawner
from tests.helpers import wait_until

from .helpers import NOBODY, catalog_of, make_runner, make_skill, nobody_python

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="reading another process's /proc entries needs root")
SECRET = "warm-shim-server-secret-5e1f"
READ_SYSCALL = {"x86_64": 0, "aarch64": 63}.get(platform.machine())
PID_SCRIPT = "import os\nprint(os.getpid())\n"


def cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return [part.decode() for part in fh.read().split(b"\0") if part]


def exec_done(pid: int) -> bool:
    """The child is past execve: /proc shows the shim's own argv (and so its own environment)."""
    try:
        return SHIM in cmdline(pid)
    except FileNotFoundError:
        return False


def waiting(pid: int) -> bool:
    """Blocked reading its configuration pipe: past every set-up step it takes before the run."""
    if not exec_done(pid):
        return False
    cfg_fd = int(cmdline(pid)[4])
    with open(f"/proc/{pid}/syscall", encoding="ascii") as fh:
        fields = fh.read().split()
    return fields[0] == str(READ_SYSCALL) and int(fields[1], 16) == cfg_fd


def gone(pid: int) -> bool:
    """Exited and reaped: no /proc entry at all (a zombie would still have one)."""
    return not os.path.exists(f"/proc/{pid}")


def skill_and_runner(root: Path, source: str = PID_SCRIPT, **kwargs: Any) -> tuple[Any, Any]:
    skill = make_skill(root, "t", {"s.py": source}, [ScriptDecl("s.py", "python", timeout=30)])
    return catalog_of(skill), make_runner(**kwargs)


def test_preparing_a_run_on_the_event_loop_leaves_one_shim_waiting(root: Path) -> None:
    catalog, runner = skill_and_runner(root)

    async def main() -> tuple[int | None, int | None]:
        runner.prepare(catalog, "t", "s.py", [])
        first = runner.spawner.warm_pid
        runner.prepare(catalog, "t", "s.py", [])  # a second preview does not start a second shim
        return first, runner.spawner.warm_pid

    first, second = anyio.run(main)
    assert first is not None and first == second
    runner.stop_running()


def test_no_shim_is_started_from_a_worker_thread(root: Path) -> None:
    # The parent-death signal follows the forking thread: a shim forked by a worker thread would
    # kill its script when that thread retires.
    catalog, runner = skill_and_runner(root)

    async def main() -> tuple[int | None, int | None]:
        await anyio.to_thread.run_sync(lambda: runner.prepare(catalog, "t", "s.py", []))
        from_thread = runner.spawner.warm_pid
        runner.prepare(catalog, "t", "s.py", [])  # positive control: on the loop's thread it does
        return from_thread, runner.spawner.warm_pid

    from_thread, on_loop = anyio.run(main)
    assert from_thread is None and on_loop is not None
    runner.stop_running()


@root_only
@pytest.mark.skipif(READ_SYSCALL is None, reason="needs the read syscall number of this architecture")
def test_a_warm_shim_holds_no_server_environment_and_nothing_but_its_pipes(root: Path) -> None:
    catalog, runner = skill_and_runner(root)
    os.environ["WARM_SHIM_TEST_SECRET"] = SECRET  # would be inherited by a child given no env
    try:
        pid = anyio.run(_warm, runner, catalog)
        # Waiting, not merely started: Python holds files open for a moment while it starts up.
        wait_until(lambda: waiting(pid), "the shim to wait for its run")
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read()
        fds = {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        args = cmdline(pid)
        # Positive control: the same reading shows what a child started the ordinary way inherits.
        plain = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        try:
            # Popen returns when the child's close-on-exec pipe closes, a moment before execve has
            # laid out the new argv and environment; /proc shows both once the new argv is there.
            wait_until(lambda: "sys.stdin.read()" in " ".join(cmdline(plain.pid)), "the control child to exec")
            with open(f"/proc/{plain.pid}/environ", "rb") as fh:
                assert SECRET.encode() in fh.read()
        finally:
            plain.communicate(b"", timeout=10)
        assert environ == b""
        assert SECRET not in " ".join(args) and args[1:3] == ["-I", "-S"]
        assert os.readlink(f"/proc/{pid}/cwd") == "/" and fds[0] == "/dev/null"
        assert sorted(fds) == [0, 1, 2, int(args[4]), int(args[5])]
        assert all(target.startswith("pipe:") for fd, target in fds.items() if fd)
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid  # a session of its own
    finally:
        del os.environ["WARM_SHIM_TEST_SECRET"]
        runner.stop_running()


async def _warm(runner: Any, catalog: Any) -> int:
    runner.prepare(catalog, "t", "s.py", [])
    pid = runner.spawner.warm_pid
    assert pid is not None
    return int(pid)


def test_a_warm_shim_serves_one_run_and_the_next_run_gets_a_new_one(root: Path) -> None:
    catalog, runner = skill_and_runner(root)

    async def main() -> list[int]:
        pids = []
        for _ in range(3):
            prepared = runner.prepare(catalog, "t", "s.py", [])
            waiting_pid = runner.spawner.warm_pid
            out = await runner.execute(prepared, confirmed=True)
            assert out["status"] == "ok" and int(out["stdout"]) == waiting_pid  # the script is that process
            pids.append(int(waiting_pid))
        return pids

    pids = anyio.run(main)
    assert len(set(pids)) == 3  # never one shim for two runs
    assert all(gone(pid) for pid in pids)  # each reaped with its run
    runner.stop_running()


def test_stop_running_kills_and_reaps_the_waiting_shim_and_no_other_starts(root: Path) -> None:
    catalog, runner = skill_and_runner(root)

    async def main() -> tuple[int, int | None, dict[str, Any]]:
        pid = await _warm(runner, catalog)
        assert not gone(pid)  # positive control: it is there before the stop
        runner.stop_running()
        assert gone(pid)  # killed and reaped by the time the closer returns: no zombie
        prepared = runner.prepare(catalog, "t", "s.py", [])
        return pid, runner.spawner.warm_pid, await runner.execute(prepared, confirmed=True)

    _pid, after_stop, out = anyio.run(main)
    assert after_stop is None
    assert out["status"] == "ok"  # a run after the stop still works, cold, and leaves none behind
    assert runner.spawner.warm_pid is None


def test_a_warm_shim_whose_spawner_is_dropped_is_killed_and_reaped(root: Path) -> None:
    # The safety net for a server that never ran its closers (a test, an embedding).
    catalog, runner = skill_and_runner(root)
    pid = anyio.run(_warm, runner, catalog)
    del runner
    gc.collect()
    assert gone(pid)


def test_a_warm_shim_that_died_while_waiting_falls_back_to_a_cold_start(root: Path) -> None:
    catalog, runner = skill_and_runner(root)

    async def main() -> tuple[int, dict[str, Any]]:
        prepared = runner.prepare(catalog, "t", "s.py", [])
        pid = runner.spawner.warm_pid
        pidfd = os.pidfd_open(pid)
        os.kill(pid, signal.SIGKILL)
        assert select.select([pidfd], [], [], 10)[0]
        os.close(pidfd)
        return pid, await runner.execute(prepared, confirmed=True)

    dead, out = anyio.run(main)
    assert out["status"] == "ok" and int(out["stdout"]) != dead
    assert gone(dead)  # the dead shim was reaped, not left a zombie
    runner.stop_running()


@root_only
@pytest.mark.skipif(READ_SYSCALL is None, reason="needs the read syscall number of this architecture")
def test_a_warm_shim_killed_after_it_was_handed_the_run_falls_back_to_a_cold_start(root: Path) -> None:
    # Stopped, the shim cannot take its configuration; once the configuration sits in its pipe it is
    # killed: the run must not mistake its end for the script's, and starts a shim of its own.
    catalog, runner = skill_and_runner(root)

    async def main() -> tuple[int, dict[str, Any]]:
        prepared = runner.prepare(catalog, "t", "s.py", [])
        pid = runner.spawner.warm_pid
        wait_until(lambda: waiting(pid), "the shim to wait for its run")
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: _state(pid) == "T", "the shim to stop")  # not merely signalled: it could still read
        with open(f"/proc/{pid}/fd/{cmdline(pid)[4]}", "rb", buffering=0) as cfg_pipe:
            result: dict[str, Any] = {}

            async def run() -> None:
                result.update(await runner.execute(prepared, confirmed=True))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await _until(lambda: _queued(cfg_pipe.fileno()) > 0, "the configuration to be sent")
                os.kill(pid, signal.SIGKILL)
        return pid, result

    killed, out = anyio.run(main)
    assert out["status"] == "ok" and int(out["stdout"]) != killed
    assert gone(killed)
    runner.stop_running()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def _queued(fd: int) -> int:
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.002)


@pytest.mark.parametrize("warm_ahead", [True, False], ids=["warm", "cold"])
def test_warm_and_cold_starts_hand_the_script_the_same_process(root: Path, warm_ahead: bool) -> None:
    source = (
        "import json, os, resource, sys\n"
        "environ = open('/proc/self/environ', 'rb').read().split(b'\\0')\n"
        "print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(), 'stdin': os.readlink('/proc/self/fd/0'),\n"
        "  'env': sorted(kv.split(b'=')[0].decode() for kv in environ if kv),\n"
        "  'tmp': oct(os.stat(os.environ['TMPDIR']).st_mode & 0o777),\n"
        "  'session': os.getsid(0) == os.getpid() == os.getpgid(0), 'fds': sorted(os.listdir('/proc/self/fd')),\n"
        "  'limits': [resource.getrlimit(r) for r in (resource.RLIMIT_CORE, resource.RLIMIT_NOFILE)],\n"
        "  'uid': os.getresuid(), 'groups': os.getgroups(),\n"
        "  'nnp': [l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')]}))\n"
    )
    catalog, runner = skill_and_runner(root, source)
    runner.spawner = LocalSpawner(drop=runner.spawner.drop, warm_ahead=warm_ahead)

    async def main() -> tuple[dict[str, Any], int | None]:
        prepared = runner.prepare(catalog, "t", "s.py", ["$(id)", "a b"])
        warm = runner.spawner.warm_pid
        return await runner.execute(prepared, confirmed=True), warm

    out, warm = anyio.run(main)
    assert (warm is not None) is warm_ahead
    shape = json.loads(out["stdout"])
    uid = (NOBODY,) * 3 if os.geteuid() == 0 else (os.getuid(),) * 3
    assert shape == {
        "argv": ["$(id)", "a b"],
        "cwd": str(root / "t"),
        "stdin": "/dev/null",
        "env": sorted({"PATH", "TMPDIR", "SKILL_OUTPUT_DIR"} | ({"HOME"} if os.geteuid() == 0 else set())),
        "tmp": "0o700",
        "session": True,
        "fds": ["0", "1", "2", "3"],
        "limits": [[0, 0], [256, 256]],
        "uid": list(uid),
        "groups": [],
        "nnp": ["1"],
    }
    runner.stop_running()


def _shim(server_pid: int, cfg: bytes | None) -> tuple[int, bytes]:
    """Run the shim by hand: its exit code and what it wrote on the status pipe."""
    cfg_r, cfg_w = os.pipe()
    st_r, st_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", SHIM, str(cfg_r), str(st_w), str(server_pid), prctl_dir(), PACKAGE_DIR],
        env={},
        pass_fds=(cfg_r, st_w),
        stdout=subprocess.DEVNULL,
    )
    os.close(cfg_r)
    os.close(st_w)
    with os.fdopen(cfg_w, "wb") as fh:
        if cfg is not None:
            try:
                fh.write(cfg)
            except BrokenPipeError:
                pass  # it gave up before reading: what the test is about
    with os.fdopen(st_r, "rb") as fh:
        status = fh.read()
    return proc.wait(timeout=30), status


def test_a_shim_whose_server_is_not_its_parent_refuses_before_it_waits() -> None:
    # The race PR_SET_PDEATHSIG leaves: the server died before the shim asked for the signal.
    code, status = _shim(1, None)
    assert code == 127 and status == b"RuntimeError: the server exited before the script started"
    # Positive control: its real parent, a configuration, and it becomes the program.
    import marshal

    cfg = marshal.dumps({"argv": ["/bin/sh", "-c", "exit 3"], "env": {}, "cwd": "/", "rlimits": {}})
    assert _shim(os.getpid(), cfg) == (3, EXEC_NEXT)


def test_a_shim_given_no_configuration_exits_quietly() -> None:
    assert _shim(os.getpid(), None) == (0, b"")


@pytest.fixture()
def warm_server(root: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], dict[str, int]]]]:
    procs: list[subprocess.Popen[bytes]] = []
    (root / "probe").mkdir()
    (root / "probe" / "probe.py").write_text("print('probe')\n", encoding="utf-8")

    def start(*prefix: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
        server = subprocess.Popen(
            [*prefix, str(Path(__file__).with_name("warm_server.py")), "idle", str(root)],
            env=env or {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        procs.append(server)
        assert server.stdout is not None
        return server, json.loads(server.stdout.readline())

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


def test_a_warm_shim_does_not_outlive_a_server_killed_with_sigkill(
    warm_server: Callable[..., tuple[subprocess.Popen[bytes], dict[str, int]]],
) -> None:
    server, pids = warm_server(sys.executable)
    pidfd = os.pidfd_open(pids["warm"])
    try:
        assert not select.select([pidfd], [], [], 0)[0]  # positive control: waiting while the server lives
        server.kill()
        server.wait(timeout=10)
        assert select.select([pidfd], [], [], 10)[0], "the warm shim outlived the killed server"
    finally:
        os.close(pidfd)


@root_only
@pytest.mark.skipif(READ_SYSCALL is None, reason="needs the read syscall number of this architecture")
def test_a_same_uid_process_cannot_attach_to_or_read_a_waiting_shim(
    warm_server: Callable[..., tuple[subprocess.Popen[bytes], dict[str, int]]],
) -> None:
    # Root passes every /proc check, so the server, the shim and the reader all run as nobody.
    found = nobody_python()
    if found is None:
        pytest.skip("needs setpriv and a Python the unprivileged user can run")
    python, pythonpath = found
    as_nobody = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
    _server, pids = warm_server(*as_nobody, python, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath})
    wait_until(lambda: waiting(pids["warm"]), "the shim to wait for its run")
    control = subprocess.Popen([*as_nobody, "sleep", "60"])  # an ordinary, dumpable process of that uid
    try:
        reader = (
            "import ctypes, json, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nout = {}\n"
            "for name, pid in (('shim', int(sys.argv[1])), ('control', int(sys.argv[2]))):\n"
            "    try:\n        open(f'/proc/{pid}/mem', 'rb').close()\n        out[name + '_mem'] = 'ok'\n"
            "    except OSError as exc:\n        out[name + '_mem'] = exc.errno\n"
            "    rc = libc.ptrace(16, pid, None, None)\n"
            "    out[name + '_attach'] = 'ok' if rc == 0 else ctypes.get_errno()\n"
            "print(json.dumps(out))\n"
        )
        done = subprocess.run(
            [*as_nobody, python, "-c", reader, str(pids["warm"]), str(control.pid)],
            capture_output=True,
            timeout=30,
            check=True,
        )
        out = json.loads(done.stdout)
    finally:
        control.kill()
        control.wait(timeout=10)
    assert out["control_mem"] == "ok" and out["control_attach"] == "ok"  # the positive control
    assert out["shim_mem"] != "ok" and out["shim_attach"] != "ok"
