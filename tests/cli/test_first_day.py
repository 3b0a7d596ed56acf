"""A new user's first commands: roots named one way, said once when wrong, errors in one line.

Each test drives the command the way a person met it: a subprocess of the installed
``skill-mcp``, the SDK's client against ``serve``, a pseudo-terminal where a terminal matters.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.cli.helpers import GOOD, as_json, run, write
from tests.serve import SKILL_MCP

pytestmark = pytest.mark.timeout(120)

BASE_ENV = {"PATH": "/usr/bin:/bin", "SKILL_MCP_LOG": "warning", "HOME": "/tmp"}


def _skill(root: Path, name: str, phase: str = "wire") -> None:
    write(root / name / "SKILL.md", GOOD.format(name=name, phase=phase))
    write(root / name / "references" / "guide.md", "# Guide\n")


# Every command that reads roots, with the words it needs besides them.
COMMANDS = {
    "list": ["list"],
    "index": ["index"],
    "search": ["search", "report"],
    "show": ["show", "alpha"],
    "tools": ["tools"],
    "call": ["call", "skill_list"],
    "validate": ["validate"],
}


# -- roots, one way for every command --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_takes_its_root_positionally_or_with_skills_dir(command: str, tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    words = COMMANDS[command]
    positional = run(*words, str(tmp_path), "--json")
    flagged = run(*words, "--skills-dir", str(tmp_path), "--json")
    assert positional.returncode == 0, positional.stderr
    assert flagged.returncode == 0, flagged.stderr
    assert as_json(positional) == as_json(flagged)
    if command == "tools":  # what it advertises names no skill; its resources are the root's
        assert as_json(positional)["resources"] != as_json(run("tools", "--json"))["resources"]
    elif command == "validate":
        assert as_json(positional)["roots"] == [str(tmp_path)] and as_json(positional)["skills"] == 1
    else:
        assert "alpha" in positional.stdout  # the root named positionally is the one read


def test_search_and_show_tell_a_root_from_their_words_by_its_spelling(tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    found = run("search", str(tmp_path), "turns", "notes", "--json")
    assert found.returncode == 0 and as_json(found)["query"] == "turns notes"
    shown = run("show", str(tmp_path), "alpha", "--json")  # the root first or last, alike
    assert shown.returncode == 0 and as_json(shown)["name"] == "alpha"
    two_names = run("show", "alpha", "beta", "--skills-dir", str(tmp_path))
    assert two_names.returncode == 2 and "expected one NAME" in two_names.stderr


def test_pack_lock_takes_its_root_either_way(tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    assert run("pack", "lock", "--skills-dir", str(tmp_path)).returncode == 0
    assert run("pack", "lock", str(tmp_path), "--check").returncode == 0
    assert run("pack", "lock", "--check").returncode == 2  # no root at all: a usage error


# -- a root that is missing or serves nothing, said once at start ----------------------------


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_names_a_missing_root_once_on_stderr(command: str, tmp_path: Path) -> None:
    typo = tmp_path / "skils"
    done = run(*COMMANDS[command], str(typo))
    assert done.stderr.count(f"the skills root {typo} is not a directory") == 1, done.stderr


def test_pack_lock_of_a_pack_that_holds_no_skill_says_so(tmp_path: Path) -> None:
    write(tmp_path / "README.md", "# nothing here\n")
    done = run("pack", "lock", str(tmp_path), "--check")
    assert done.stderr.count(f"no skill found under {tmp_path}") == 1


@pytest.mark.slow
def test_serve_names_a_missing_root_in_its_log_and_in_its_instructions(tmp_path: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    typo = str(tmp_path / "skils")
    log = tmp_path / "stderr.log"

    async def instructions() -> str:
        # The server's stderr goes to a file (exec keeps the server the process the client talks to).
        params = StdioServerParameters(
            command="bash", args=["-c", 'exec "$0" serve "$1" 2>"$2"', SKILL_MCP, typo, str(log)], env=BASE_ENV
        )
        async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
            return client.instructions or ""

    text = anyio.run(instructions)
    assert typo in text and "not a directory" in text
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("{")]
    said = [line for line in lines if line.get("event") == "root-missing"]
    assert len(said) == 1 and said[0]["path"] == typo and said[0]["level"] == "warning"


@pytest.mark.slow
def test_serve_of_a_good_root_says_nothing_about_it(tmp_path: Path) -> None:  # the positive control
    _skill(tmp_path, "alpha")
    done = subprocess.run(
        [SKILL_MCP, "serve", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=BASE_ENV,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0 and "root-" not in done.stderr and done.stdout == ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_http(args: list[str]) -> tuple[subprocess.Popen[str], list[str]]:
    """``serve --http`` on a free loopback port; returns once it answers HTTP (so it is serving,
    its signal handlers in place)."""
    port = _free_port()
    proc = subprocess.Popen(
        [SKILL_MCP, "serve", "--http", f"127.0.0.1:{port}", "--no-auth", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**BASE_ENV, "SKILL_MCP_LOG": "info"},
    )  # "http listening" is an info line
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while not any("http listening" in line for line in lines):
        assert time.monotonic() < deadline and proc.poll() is None, lines
        lines.append(proc.stderr.readline())
    import http.client

    # The socket listens before uvicorn runs (it is bound first): only an answer proves it serves.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/mcp")
        conn.getresponse().read()
    finally:
        conn.close()
    return proc, lines


@pytest.mark.slow
def test_serve_over_http_names_a_missing_root_once_at_start(tmp_path: Path) -> None:
    typo = str(tmp_path / "skils")
    proc, lines = _start_http(["--skills-dir", typo])
    try:
        said = [json.loads(line) for line in lines if '"root-missing"' in line]
        assert len(said) == 1 and said[0]["path"] == typo
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def test_a_root_one_level_too_high_names_the_skill_md_below_it(tmp_path: Path) -> None:
    _skill(tmp_path / "documents", "pdf")  # ROOT/category/skill/SKILL.md
    done = run("list", str(tmp_path))
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.count(f"no skill found under {tmp_path}") == 1
    assert f"{tmp_path}/documents/pdf/SKILL.md" in done.stderr
    assert f"--skills-dir {tmp_path}/documents" in done.stderr
    checked = run("validate", str(tmp_path))  # the same hint among validate's problems
    assert f"name {tmp_path}/documents as a root" in checked.stdout
    assert run("list", str(tmp_path / "documents")).stdout.startswith("pdf")  # the way the hint names


def test_a_lower_case_skill_md_is_named_rather_than_called_missing(tmp_path: Path) -> None:
    write(tmp_path / "pdf" / "skill.md", GOOD.format(name="pdf", phase="wire"))
    done = run("list", str(tmp_path))
    assert f"found {tmp_path}/pdf/skill.md: the file must be named SKILL.md" in done.stderr
    problems = as_json(run("index", str(tmp_path), "--json"))["problems"]
    assert [p["reason"] for p in problems] == ["no-skill-md"] and "found" in problems[0]["detail"]


def test_list_ends_with_what_it_did_not_serve_and_where_to_read_why(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for name in ("alpha", "beta", "dup"):
        _skill(first, name)
    _skill(second, "dup")
    write(second / "broken" / "SKILL.md", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
    done = run("list", str(first), str(second))
    assert done.returncode == 0 and done.stdout.split()[0] == "alpha"
    last = done.stderr.splitlines()[-1]
    assert "2 served, 3 not served (2 duplicate-name, 1 frontmatter-parse)" in last
    assert f"skill-mcp validate {first} {second}" in last
    clean = run("list", str(first / "alpha"))  # nothing refused: nothing said
    assert clean.returncode == 0 and clean.stderr == ""


# -- errors: one line, the documented exit ---------------------------------------------------


def test_an_unknown_flag_gets_that_commands_own_usage_error(tmp_path: Path) -> None:
    text = run("list", "--bogus")
    assert text.returncode == 2 and text.stderr.startswith("usage: skill-mcp list ")
    as_json_err = run("list", "--bogus", "--json")
    assert as_json_err.returncode == 2
    (said,) = [json.loads(line) for line in as_json_err.stderr.splitlines()]
    assert said["reason"] == "usage" and said["exit"] == 2 and "skill-mcp list" in said["error"]
    assert "--bogus" in said["error"]


def test_list_of_an_unrecognized_positional_is_no_longer_a_usage_error(tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    done = run("list", str(tmp_path))
    assert done.returncode == 0 and "unrecognized arguments" not in done.stderr


@pytest.mark.parametrize("command", ["", "serve", "list", "call", "validate", "pack"])
def test_help_points_at_what_an_installed_package_has(command: str) -> None:
    done = run(*([command] if command else []), "--help")
    assert done.returncode == 0 and "docs/cli.md" not in done.stdout
    if not command:
        assert "skill-mcp COMMAND --help" in done.stdout and "completion" in done.stdout


def test_a_port_already_in_use_is_one_line_and_exit_3() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [SKILL_MCP, "serve", "--http", f"127.0.0.1:{port}", "--no-auth"],
            capture_output=True,
            text=True,
            timeout=60,
            env=BASE_ENV,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    assert done.returncode == 3
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower() and not line.startswith("{")]
    assert errors == [
        f"skill-mcp: error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another process listens there: stop it, or pick another port with --http HOST:PORT)"
    ]
    assert "Traceback" not in done.stderr


def _stdio_server(root: Path) -> subprocess.Popen[bytes]:
    """``serve`` answering a handshake on stdio: from then on it is surely serving."""
    proc = subprocess.Popen(
        [SKILL_MCP, "serve", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=BASE_ENV,
    )
    assert proc.stdin is not None and proc.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    proc.stdin.write((json.dumps(hello) + "\n").encode())
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    return proc


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_ctrl_c_on_serve_exits_130_and_sigterm_0(sent: signal.Signals, code: int, tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    proc = _stdio_server(tmp_path)
    proc.send_signal(sent)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err


@pytest.mark.slow
@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_ctrl_c_on_serve_over_http_exits_130_and_sigterm_0(sent: signal.Signals, code: int, tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    proc, _ = _start_http([str(tmp_path)])
    proc.send_signal(sent)
    proc.communicate(timeout=60)
    assert proc.returncode == code


# -- progress on a terminal, never on stdout -------------------------------------------------


def _many(root: Path, count: int) -> Path:
    for i in range(count):
        _skill(root, f"skill-{i:04d}")
    return root


def _stderr_on_a_terminal(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run with stderr on a pty (stdout a pipe); (exit, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [SKILL_MCP, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env={**BASE_ENV, "SKILL_MCP_CACHE": "off", **(env or {})},
    )
    os.close(slave)
    shown = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed its side
                    break
                if not chunk:
                    break
                shown += chunk
            elif proc.poll() is not None:
                break
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    return proc.returncode, stdout.decode(), shown.decode(errors="replace")


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["list"], "reading skills: "),
        (["validate", "--strict"], "checking the floors: "),
        (["search", "report"], "indexing skills for search: "),
    ],
)
def test_long_work_shows_progress_on_a_terminal_and_never_on_stdout(
    args: list[str], label: str, tmp_path: Path
) -> None:
    root = _many(tmp_path / "skills", 60)
    code, stdout, shown = _stderr_on_a_terminal([*args, str(root)])
    assert code == 0, shown
    assert label in shown and "\x1b[K" in shown  # drawn in place, and cleared
    assert "reading skills" not in stdout and "\r" not in stdout
    piped = run(*args, str(root), env={"SKILL_MCP_CACHE": "off"})  # not a terminal: not a byte of it
    assert piped.returncode == 0 and "reading skills" not in piped.stderr and "\r" not in piped.stderr


def test_pack_lock_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    root = _many(tmp_path / "pack", 30)
    code, stdout, shown = _stderr_on_a_terminal(["pack", "lock", str(root)])
    assert code == 0 and "pinning skills: " in shown and stdout.startswith(str(root / "pack.json"))


# -- near names --------------------------------------------------------------------------------


def test_show_of_a_misspelt_name_suggests_the_served_one(tmp_path: Path) -> None:
    _skill(tmp_path, "pdf")
    _skill(tmp_path, "docx")
    done = run("show", "pfd", str(tmp_path))
    assert done.returncode == 1 and "closest: pdf" in done.stderr


@pytest.mark.slow
def test_skill_load_of_one_letter_suggests_nothing(tmp_path: Path) -> None:
    _skill(tmp_path, "finishing-a-development-branch")
    done = run("call", "skill_load", str(tmp_path), "--args", '{"name": "a"}', "--json")
    assert done.returncode == 1
    structured = as_json(done)["structuredContent"]
    assert structured["reason"] == "unknown-skill" and structured.get("closest", []) == []


@pytest.mark.slow
def test_call_of_an_unknown_tool_names_the_near_one_or_lists_them(tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    near = run("call", "skill_lod", str(tmp_path))
    assert near.returncode == 1 and "did you mean skill_load" in near.stderr
    far = run("call", "nope", str(tmp_path))
    assert far.returncode == 1 and "the server's tools: " in far.stderr and "skill_list" in far.stderr


def test_a_phase_that_matches_nothing_lists_the_phases(tmp_path: Path) -> None:
    _skill(tmp_path, "alpha", "wire")
    _skill(tmp_path, "beta", "verify")
    done = run("list", str(tmp_path), "--phase", "nope")
    assert done.stderr == "no skills in phase 'nope'; the phases served: verify, wire\n"


@pytest.mark.slow
def test_skill_file_in_the_wrong_case_names_the_served_file_and_exits_1(tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    write(tmp_path / "alpha" / "forms.md", "# Forms\n")
    done = run("call", "skill_file", str(tmp_path), "--args", '{"name": "alpha", "paths": ["FORMS.md"]}', "--json")
    assert done.returncode == 1 and "none of the 1 files could be read" in done.stderr
    (entry,) = as_json(done)["structuredContent"]["files"]
    assert entry["error"]["reason"] == "not-found" and entry["error"]["closest"][0] == "forms.md"
    assert "closest: forms.md" in entry["error"]["detail"]
    some = run("call", "skill_file", str(tmp_path), "--args", '{"name": "alpha", "paths": ["FORMS.md", "forms.md"]}')
    assert some.returncode == 0  # the positive control: one file served is an answer


# -- completion ------------------------------------------------------------------------------


def _complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash completes for the line ``words`` (the last word being completed)."""
    script = subprocess.run(
        [SKILL_MCP, "completion", "bash"], capture_output=True, text=True, timeout=60, env=BASE_ENV, check=True
    ).stdout
    line = words.split(" ")
    program = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in line)}); COMP_CWORD={len(line) - 1}\n"
        "_skill_mcp; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    path = os.path.dirname(SKILL_MCP) + ":/usr/bin:/bin"
    done = subprocess.run(
        ["bash", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**BASE_ENV, "PATH": path, **(env or {})},
    )
    return [w for w in done.stdout.splitlines() if w]


@pytest.mark.slow
def test_bash_completion_completes_commands_flags_and_skill_names(tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    assert _complete("skill-mcp li") == ["list"]
    assert _complete("skill-mcp list --ph") == ["--phase"]
    assert _complete("skill-mcp completion z") == ["zsh"]
    assert _complete("skill-mcp show al", env={"SKILLS_DIR": str(tmp_path)}) == ["alpha"]
    assert _complete(f"skill-mcp list --skills-dir {tmp_path}/al") == [f"{tmp_path}/alpha"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_every_shell_gets_a_script_naming_every_command(shell: str) -> None:
    from skill_mcp.cli.main import COMMANDS as ALL

    done = run("completion", shell)
    assert done.returncode == 0 and all(name in done.stdout for name in ALL)
    if shell == "bash":
        assert subprocess.run(["bash", "-n"], input=done.stdout, text=True, check=False).returncode == 0


# -- call skill_run: the script's output as it comes -----------------------------------------

WAITER = """---
name: waiter
description: Prints a line, waits for a gate file, prints another. Use when testing streaming.
mcp-host:
  version: 1
  run:
    - script: scripts/wait.py
      interpreter: python
---
# Waiter

1. Run `scripts/wait.py GATE`.
"""
WAIT_PY = """import os, sys, time
print("first", flush=True)
print("err-first", file=sys.stderr, flush=True)
deadline = time.monotonic() + 50
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
print("second", flush=True)
"""


@pytest.fixture
def waiter() -> Iterator[Path]:
    """A root every uid can read (a root server drops the script to ``nobody``)."""
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-stream-"))
    base.chmod(0o755)
    write(base / "waiter" / "SKILL.md", WAITER)
    write(base / "waiter" / "scripts" / "wait.py", WAIT_PY)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_waiter(root: Path, gate: Path, *extra: str) -> subprocess.Popen[bytes]:
    args = json.dumps({"skill": "waiter", "script": "scripts/wait.py", "args": [str(gate)]})
    return subprocess.Popen(
        [SKILL_MCP, "call", "skill_run", str(root), "--args", args, "--yes", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=BASE_ENV,
    )


def _read_line(stream: IO[bytes], within: float = 60.0) -> bytes:
    ready, _, _ = select.select([stream], [], [], within)
    assert ready, "no line in time"
    return stream.readline()


@pytest.mark.slow
def test_call_skill_run_shows_the_scripts_output_as_it_is_written(waiter: Path) -> None:
    gate = waiter / "gate"
    proc = _run_waiter(waiter, gate)
    assert proc.stdout is not None
    try:
        assert _read_line(proc.stdout) == b"first\n"
        # The script is still waiting for the gate, so this line came while it ran.
        assert proc.poll() is None and not gate.exists()
        gate.write_text("open\n", encoding="utf-8")
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0 and rest == b"second\n"
    text = err.decode()
    assert text.index("err-first") < text.index("skill-mcp: waiter scripts/wait.py: ok (exit 0, ")
    assert text.count("first") == 1  # streamed once, not printed again at the end


def _script_processes(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_after_ctrl_c_the_output_that_came_stays_and_the_exit_is_130(waiter: Path) -> None:
    gate = waiter / "never-opened"
    proc = _run_waiter(waiter, gate)
    assert proc.stdout is not None
    try:
        assert _read_line(proc.stdout) == b"first\n"
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 130 and rest == b""
    deadline = time.monotonic() + 30
    while _script_processes(str(gate)):  # the script does not outlive the command
        assert time.monotonic() < deadline, "the script outlived the interrupted call"
        time.sleep(0.1)


@pytest.mark.slow
def test_call_skill_run_with_json_streams_nothing_and_prints_the_whole_result(waiter: Path) -> None:
    gate = waiter / "gate"
    gate.write_text("open\n", encoding="utf-8")
    proc = _run_waiter(waiter, gate, "--json")
    out, _ = proc.communicate(timeout=60)
    result = json.loads(out)["structuredContent"]
    assert (result["status"], result["stdout"]) == ("ok", "first\nsecond\n")


@pytest.mark.slow
def test_call_skill_run_on_a_terminal_writes_no_json_audit_line(waiter: Path) -> None:
    gate = waiter / "gate"
    gate.write_text("open\n", encoding="utf-8")
    args = json.dumps({"skill": "waiter", "script": "scripts/wait.py", "args": [str(gate)]})
    code, stdout, shown = _stderr_on_a_terminal(
        ["call", "skill_run", str(waiter), "--args", args, "--yes"], env={"SKILL_MCP_LOG": "error"}
    )
    assert code == 0 and stdout == "first\nsecond\n"
    assert "skill-mcp: waiter scripts/wait.py: ok" in shown
    assert '{"ts"' not in shown and "skill_mcp.audit" not in shown
    piped = run("call", "skill_run", str(waiter), "--args", args, "--yes")  # a log, not a person: the JSON line
    audit = [json.loads(line) for line in piped.stderr.splitlines() if line.startswith("{")]
    assert [a["event"] for a in audit] == ["skill_run"]


def test_a_directory_meant_as_a_skill_is_counted_and_shown_why(tmp_path: Path) -> None:
    _skill(tmp_path, "alpha")
    write(tmp_path / "pdf" / "skill.md", GOOD.format(name="pdf", phase="wire"))
    write(tmp_path / "docs" / "README.md", "# not a skill, and not meant as one\n")
    listed = run("list", str(tmp_path))
    assert listed.stderr.splitlines()[-1].startswith("skill-mcp: 1 served, 1 not served (1 no-skill-md); ")
    shown = run("show", "pdf", str(tmp_path))
    assert shown.returncode == 1 and f"found {tmp_path}/pdf/skill.md" in shown.stderr
