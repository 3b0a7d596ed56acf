"""Bounded, and the call always returns: real subprocesses through the Runner.

Tiny python / node / bash children, each proving one rule. Timings are asserted only as upper
bounds that a broken rule would blow through by many seconds (never "sleep to let it settle").
"""

from __future__ import annotations

import gc
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp.models import ScriptDecl
from skill_mcp.reasons import Refusal
from skill_mcp.runner.interpreters import Interpreters
from skill_mcp.runner.types import CAPTURE_LIMIT

from .helpers import catalog_of, make_runner, make_skill, wait_for_argv0

SECRET = "hunter2-server-secret"


def run(
    root: Path,
    interpreter: str,
    source: str,
    args: list[str] | None = None,
    *,
    timeout: int = 20,
    environ: Mapping[str, str] | None = None,
    env: tuple[str, ...] = (),
    runner: Any = None,
) -> dict[str, Any]:
    ext = {"python": "py", "node": "js", "bash": "sh"}[interpreter]
    rel = f"scripts/main.{ext}"
    skill = make_skill(root, "t", {rel: source}, [ScriptDecl(rel, interpreter, env=env, timeout=timeout)])
    runner = runner or make_runner(environ)

    async def main() -> dict[str, Any]:
        # Prepared on the event loop, as the server does: the run goes through the shim this
        # starts ahead of it (test_warm_shim.py holds both starts to the same process shape).
        prepared = runner.prepare(catalog_of(skill), "t", rel, args or [])
        return await runner.execute(prepared, confirmed=True)

    return anyio.run(main)


def test_a_nonzero_exit_is_a_normal_result_with_its_output(root: Path) -> None:
    out = run(root, "python", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(7)\n")
    assert (out["status"], out["exitCode"], out["stdout"], out["stderr"]) == ("error", 7, "out\n", "err\n")


def test_a_signalled_script_reports_the_signal(root: Path) -> None:
    out = run(root, "bash", "kill -SEGV $$\n")
    assert (out["status"], out["signal"], out["exitCode"]) == ("killed", "SIGSEGV", None)


@pytest.mark.parametrize(
    ("interpreter", "source"),
    [
        ("python", "import sys\nfor _ in range(50):\n    sys.stdout.buffer.write(b'x' * (1 << 20))\n"),
        (
            "node",
            "const b = Buffer.alloc(1 << 20, 120);\nfor (let i = 0; i < 50; i++) require('fs').writeSync(1, b);\n",
        ),
        ("bash", "head -c 52428800 /dev/zero\n"),
    ],
)
def test_a_50_mb_flood_is_capped_at_1_mib_and_counted(root: Path, interpreter: str, source: str) -> None:
    out = run(root, interpreter, source)
    assert out["status"] == "ok"
    assert len(out["stdout"].encode()) == CAPTURE_LIMIT
    assert out["truncated"] == {"stdout": True, "stderr": False}
    assert out["droppedBytes"] == 50 * (1 << 20) - CAPTURE_LIMIT


def test_output_under_the_cap_is_not_truncated(root: Path) -> None:  # positive control
    out = run(root, "python", "import sys\nsys.stdout.write('y' * 1000)\n")
    assert out["truncated"] == {"stdout": False, "stderr": False} and out["droppedBytes"] == 0


# The scripts below would run 60 s or more; a call back well before that was not held by them.
# A bound this loose cannot flake on a loaded machine; how fast the stop is belongs to bench/.
WELL_UNDER_THE_SCRIPTS_OWN_S = 30


@pytest.mark.slow
def test_a_sleeper_past_its_timeout_is_stopped(root: Path) -> None:
    started = time.monotonic()
    out = run(root, "python", "import time\nprint('start', flush=True)\ntime.sleep(60)\n", timeout=1)
    assert time.monotonic() - started < WELL_UNDER_THE_SCRIPTS_OWN_S
    assert (out["status"], out["signal"], out["stdout"]) == ("timeout", "SIGTERM", "start\n")


@pytest.mark.slow
def test_a_sigterm_ignorer_gets_sigkill_after_the_grace(root: Path) -> None:
    source = "trap '' TERM\necho ready\nwhile :; do sleep 0.05; done\n"
    started = time.monotonic()
    out = run(root, "bash", source, timeout=1)
    assert time.monotonic() - started < WELL_UNDER_THE_SCRIPTS_OWN_S
    assert (out["status"], out["signal"]) == ("timeout", "SIGKILL")


def _kill_pid_from(text: str) -> None:
    for line in text.splitlines():
        if line.startswith("grandchild "):
            try:
                os.kill(int(line.split()[1]), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
@pytest.mark.parametrize("parent_sleeps", [False, True])
def test_a_detached_grandchild_holding_stdout_cannot_hold_the_call(root: Path, parent_sleeps: bool) -> None:
    # The grandchild starts its own session (so the group kill misses it) and keeps stdout open.
    source = (
        "import os, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
        "print('grandchild', p.pid, file=sys.stderr, flush=True)\n" + ("time.sleep(120)\n" if parent_sleeps else "")
    )
    timeout = 2
    started = time.monotonic()
    out = run(root, "python", source, timeout=timeout)
    try:
        assert time.monotonic() - started < WELL_UNDER_THE_SCRIPTS_OWN_S
        assert any("may still be running" in note for note in out.get("notes", []))
        assert out["status"] == ("timeout" if parent_sleeps else "ok")
    finally:
        _kill_pid_from(out["stderr"])


def test_a_child_that_stayed_in_the_group_is_ended_with_the_script(root: Path) -> None:
    source = 'sleep 120 &\necho "grandchild $!" >&2\n'
    out = run(root, "bash", source)
    pid = int(out["stderr"].split()[1])
    assert _dead_or_zombie(pid)
    assert "notes" not in out


def _dead_or_zombie(pid: int) -> bool:
    # Reaping the orphan is init's business (a container's PID 1 may never do it); dead is enough.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_the_environment_holds_only_the_allowlist_and_granted_names(root: Path) -> None:
    environ = {"SERVER_ONLY_SECRET": SECRET, "WANTED": "granted-value", "LANG": "C.UTF-8"}
    source = "process.stdout.write(require('fs').readFileSync('/proc/self/environ', 'utf8'))\n"
    out = run(root, "node", source, environ=environ, env=("WANTED",))
    names = {kv.split("=", 1)[0] for kv in out["stdout"].split("\0") if kv}
    assert names == {"PATH", "LANG", "TMPDIR", "SKILL_OUTPUT_DIR", "WANTED"} | (
        {"HOME"} if "HOME" in os.environ else set()
    )
    assert SECRET not in out["stdout"] and "WANTED=granted-value" in out["stdout"]


def test_arguments_arrive_verbatim_never_through_a_shell(root: Path, tmp_path: Path) -> None:
    hostile = ["$(id)", "; touch /tmp/skill-mcp-pwned", "`id`", "a && b", "*", "'\"", "$HOME", "-e"]
    out = run(root, "python", "import json, sys\nprint(json.dumps(sys.argv[1:]))\n", hostile)
    assert json.loads(out["stdout"]) == hostile
    out = run(root, "bash", 'printf "%s\\n" "$@"\n', hostile)
    assert out["stdout"].splitlines() == hostile
    assert not os.path.exists("/tmp/skill-mcp-pwned")


def test_stdin_is_dev_null_and_cwd_is_the_skill_directory(root: Path) -> None:
    source = (
        "import os, sys\nprint(repr(sys.stdin.read()))\nprint(os.getcwd())\nprint(os.readlink('/proc/self/fd/0'))\n"
    )
    out = run(root, "python", source)
    assert out["stdout"].splitlines() == ["''", str(root / "t"), "/dev/null"]


def test_each_run_gets_a_private_tmpdir_removed_afterwards(root: Path) -> None:
    source = (
        "import os, tempfile\nd = os.environ['TMPDIR']\nopen(os.path.join(d, 'f'), 'w').write('x')\n"
        "print(d, tempfile.gettempdir() == d, oct(os.stat(d).st_mode & 0o777))\n"
    )
    first = run(root, "python", source)["stdout"].split()
    second = run(root, "python", source)["stdout"].split()
    assert first[0] != second[0] and first[1] == "True" and first[2] == "0o700"
    assert not os.path.exists(first[0]) and not os.path.exists(second[0])


def test_rlimits_core_nofile_fsize_are_set(root: Path) -> None:
    source = (
        "import resource\nfor r in (resource.RLIMIT_CORE, resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE):\n"
        "    print(*resource.getrlimit(r))\n"
    )
    core, nofile, fsize = (tuple(map(int, line.split())) for line in run(root, "python", source)["stdout"].splitlines())
    assert core == (0, 0) and nofile == (256, 256) and fsize == (64 << 20, 64 << 20)


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop applies only when the server runs as root")
def test_a_root_server_never_runs_a_script_as_root(root: Path) -> None:
    source = (
        "import os\nprint(os.getresuid(), os.getresgid(), os.getgroups())\n"
        "print([l for l in open('/proc/self/status') if l.startswith(('NoNewPrivs', 'CapEff', 'CapPrm'))])\n"
    )
    out = run(root, "python", source)["stdout"]
    assert "(65534, 65534, 65534)" in out and "[]" in out.splitlines()[0]
    assert "NoNewPrivs:\\t1" in out and "CapEff:\\t0000000000000000" in out and "CapPrm:\\t0000000000000000" in out


class GatedSpawner:
    """Wraps the real spawner and says when a run has started: an ordering point, not a sleep."""

    name = "local"

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.started = anyio.Event()

    async def run(self, plan: Any) -> Any:
        self.started.set()
        return await self.inner.run(plan)


@pytest.mark.slow
def test_one_run_at_a_time_a_second_call_is_refused_at_once(root: Path) -> None:
    skill = make_skill(
        root, "t", {"a.sh": "sleep 2\n", "b.sh": "echo b\n"}, [ScriptDecl("a.sh", "bash"), ScriptDecl("b.sh", "bash")]
    )
    catalog = catalog_of(skill)

    async def main() -> None:
        gated = GatedSpawner(make_runner().spawner)
        runner = make_runner(spawner=gated)
        first: dict[str, Any] = {}

        async def long_run() -> None:
            first.update(await runner.execute(runner.prepare(catalog, "t", "a.sh", []), confirmed=True))

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_run)
            await gated.started.wait()
            with pytest.raises(SkillMcpError) as info:
                await runner.execute(runner.prepare(catalog, "t", "b.sh", []), confirmed=True)
            assert info.value.reason == Refusal.BUSY
            assert not first  # refused while the first run still ran: it did not wait for the lock
        assert first["status"] == "ok"
        after = await runner.execute(runner.prepare(catalog, "t", "b.sh", []), confirmed=True)
        assert after["stdout"] == "b\n"  # the lock was released

    anyio.run(main)


def test_the_lock_is_released_after_a_spawn_failure(root: Path) -> None:
    skill = make_skill(root, "t", {"a.py": "print(1)\n"}, [ScriptDecl("a.py", "python")])
    broken = make_runner(interpreters=Interpreters({"python": "/nonexistent/python3"}))
    prepared = broken.prepare(catalog_of(skill), "t", "a.py", [])
    for _ in range(2):
        with pytest.raises(SkillMcpError) as info:
            anyio.run(lambda: broken.execute(prepared, confirmed=True))
        assert info.value.reason == Refusal.SPAWN_FAILED


def test_one_audit_line_per_run_with_names_never_values(root: Path) -> None:
    records: list[Mapping[str, Any]] = []
    runner = make_runner({"WANTED": SECRET}, audit=records.append)
    run(root, "python", "print(1)\n", ["arg1"], env=("WANTED",), runner=runner)
    assert len(records) == 1
    rec = records[0]
    assert rec["event"] == "skill_run" and "WANTED" in rec["env"] and rec["argv"][-1] == "arg1"
    assert SECRET not in json.dumps(rec) and rec["status"] == "ok" and "durationMs" in rec


def test_a_failed_run_on_a_fenced_machine_carries_the_blocked_host_note(root: Path) -> None:
    fenced = make_runner({"HTTPS_PROXY": "http://127.0.0.1:3128"})
    out = run(root, "python", "raise SystemExit(1)\n", runner=fenced)
    assert any("403" in note and "timeout" in note for note in out["notes"])
    out = run(root, "python", "raise SystemExit(1)\n", runner=make_runner(fenced=False))
    assert "notes" not in out  # positive control: not fenced, no note


def test_no_descriptor_leaks_across_runs(root: Path) -> None:
    runner = make_runner()
    run(root, "python", "print(1)\n", runner=runner)
    # Runners other tests dropped in reference cycles close their waiting shim's descriptors when
    # the collector gets to them: collect first, so only this runner's descriptors are counted.
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        run(root, "bash", "echo hi; echo err >&2\n", runner=runner)
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_cancelled_call_ends_the_script_and_releases_the_lock(root: Path) -> None:
    # What happens when the server shuts down (or the caller goes away) mid-run.
    name = f"skill-mcp-cancelled-{os.getpid()}"
    source = f"exec -a {name} sleep 120\n"
    skill = make_skill(
        root,
        "t",
        {"a.sh": source, "b.sh": "echo b\n"},
        [ScriptDecl("a.sh", "bash", timeout=120), ScriptDecl("b.sh", "bash")],
    )
    catalog = catalog_of(skill)

    def wait_started() -> int:
        return wait_for_argv0(name)  # the script is running

    script_pid: list[int] = []

    async def main() -> None:
        runner = make_runner()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: runner.execute(runner.prepare(catalog, "t", "a.sh", []), confirmed=True))
            script_pid.append(await anyio.to_thread.run_sync(wait_started))
            tg.cancel_scope.cancel()
        assert not runner._busy
        after = await runner.execute(runner.prepare(catalog, "t", "b.sh", []), confirmed=True)
        assert after["stdout"] == "b\n"

    started = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - started < 10
    assert _dead_or_zombie(script_pid[0])


def test_stop_running_ends_the_script_and_its_call_returns_a_result(root: Path) -> None:
    # Server shutdown (Plugins.closers): the in-flight call is answered, not cut.
    name = f"skill-mcp-stopped-{os.getpid()}"
    source = f"echo partial\nexec -a {name} sleep 120\n"
    skill = make_skill(root, "t", {"a.sh": source}, [ScriptDecl("a.sh", "bash", timeout=120)])
    catalog = catalog_of(skill)

    def wait_started() -> int:
        return wait_for_argv0(name)

    async def main() -> dict[str, Any]:
        runner = make_runner()
        result: dict[str, Any] = {}

        async def call() -> None:
            result.update(await runner.execute(runner.prepare(catalog, "t", "a.sh", []), confirmed=True))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.to_thread.run_sync(wait_started)
            runner.stop_running()
        return result

    started = time.monotonic()
    out = anyio.run(main)
    assert time.monotonic() - started < 10
    assert (out["status"], out["signal"], out["stdout"]) == ("killed", "SIGTERM", "partial\n")
    assert any("shutting down" in note for note in out["notes"])


def test_the_interpreter_comes_from_the_declaration_never_the_shebang_or_extension(root: Path) -> None:
    # A .sh file with a bash shebang, declared as python, runs under python: the file cannot choose.
    source = "#!/bin/bash\nimport sys; print('python', sys.version_info[0])\n"
    skill = make_skill(root, "t", {"x.sh": source}, [ScriptDecl("x.sh", "python")])
    runner = make_runner()
    prepared = runner.prepare(catalog_of(skill), "t", "x.sh", [])
    out = anyio.run(lambda: runner.execute(prepared, confirmed=True))
    assert out["stdout"] == "python 3\n" and prepared.plan.argv[0] == runner.interpreters.paths["python"]


def test_a_script_does_not_outlive_a_server_killed_with_sigkill(root: Path) -> None:
    # PR_SET_PDEATHSIG, set by the exec shim after the uid drop: the only supervisor is gone.
    import select
    import subprocess
    import sys

    name = f"skill-mcp-orphan-{os.getpid()}"
    (root / "long").mkdir()
    (root / "long" / "long.sh").write_text(f"exec -a {name} sleep 120\n", encoding="utf-8")
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("orphan_server.py")), str(root)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        script_pid = wait_for_argv0(name)  # the script runs
        pidfd = os.pidfd_open(script_pid)
        try:
            assert not select.select([pidfd], [], [], 0)[0]  # positive control: alive while the server is
            server.kill()
            server.wait(timeout=10)
            assert select.select([pidfd], [], [], 10)[0], "the script outlived the killed server"
        finally:
            os.close(pidfd)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
        assert server.stderr is not None
        server.stderr.close()


def test_the_private_tmpdir_is_removed_even_when_the_script_locks_itself_out(root: Path) -> None:
    source = (
        "import os\nd = os.path.join(os.environ['TMPDIR'], 'locked')\nos.makedirs(os.path.join(d, 'deep'))\n"
        "open(os.path.join(d, 'deep', 'f'), 'w').write('x')\nos.chmod(os.path.join(d, 'deep'), 0)\n"
        "os.chmod(d, 0)\nprint(os.environ['TMPDIR'])\n"
    )
    out = run(root, "python", source)
    assert out["status"] == "ok" and not os.path.exists(out["stdout"].strip())


def test_the_default_audit_sink_writes_one_json_line_on_stderr(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from skill_mcp.runner.audit import stderr_sink

    runner = make_runner({"WANTED": SECRET}, audit=stderr_sink)
    run(root, "python", "print(1)\n", env=("WANTED",), runner=runner)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1
    record = json.loads(lines[0])
    assert record["logger"] == "skill_mcp.audit" and record["msg"] == "skill_run" and "WANTED" in record["env"]
    assert SECRET not in lines[0]
