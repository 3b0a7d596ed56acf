"""Check that a stdio MCP server keeps stdout for JSON-RPC messages only.

Usage: check_stdout.py [--timeout SECONDS] [--protocol VERSION] [-- COMMAND ARG...]

Starts COMMAND (default: skill-mcp serve), sends a handshake, one malformed line, a ping
and tools/list, then closes stdin. Every stdout line must be a JSON-RPC 2.0 message.
Standard library only; no network. Exit 0 = PASS, 1 = FAIL, 2 = could not start.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from typing import IO, Any

Line = tuple[str, str | None]

MALFORMED = "this line is not json {"
MAX_LINE = 1 << 20  # a single stdout line larger than this is reported, not buffered


def say(text: str) -> None:
    sys.stdout.write(text + "\n")


def default_command() -> list[str] | None:
    """Find skill-mcp on PATH, or beside the Python running this script (a venv)."""
    found = shutil.which("skill-mcp")
    if found:
        return [found, "serve"]
    sibling = os.path.join(os.path.dirname(sys.executable), "skill-mcp")
    if os.access(sibling, os.X_OK):
        return [sibling, "serve"]
    return None


def parse_args(argv: list[str]) -> tuple[float, str, list[str] | None]:
    timeout, protocol, command = 20.0, "2025-11-25", None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            command = argv[i + 1:] or None
            break
        if arg in ("--timeout", "--protocol") and i + 1 < len(argv):
            if arg == "--timeout":
                timeout = float(argv[i + 1])
            else:
                protocol = argv[i + 1]
            i += 2
            continue
        command = argv[i:]
        break
    return timeout, protocol, command


def pump(stream: IO[str], sink: queue.Queue[Line], tag: str) -> None:
    """Read lines until EOF; the reader thread is a daemon so it never holds the exit."""
    while True:
        line = stream.readline(MAX_LINE)
        if not line:
            sink.put((tag, None))
            return
        sink.put((tag, line))


def is_message(obj: object) -> bool:
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        return False
    return "method" in obj or ("id" in obj and ("result" in obj or "error" in obj))


def requests(protocol: str) -> list[str]:
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": protocol, "capabilities": {},
                   "clientInfo": {"name": "check-stdout-purity", "version": "1"}},
    }
    lines = [json.dumps(init), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]
    lines.append(MALFORMED)
    lines.append(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    lines.append(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
    return [line + "\n" for line in lines]


def drain(sink: queue.Queue[Line], out: list[str], err: list[str], grace: float = 2.0) -> None:
    """After the server stopped, keep what it wrote on the way out (bounded by ``grace``)."""
    deadline = time.monotonic() + grace
    closed = 0
    while closed < 2 and time.monotonic() < deadline:
        try:
            tag, line = sink.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return
        if line is None:
            closed += 1
        else:
            (out if tag == "out" else err).append(line)


def collect(sink: queue.Queue[Line], out: list[str], err: list[str],
            timeout: float) -> bool:
    """Gather stdout and stderr lines until ids 1-3 and a -32700 arrived, or the deadline."""
    wanted: set[object] = {1, 2, 3, "parse"}
    deadline = time.monotonic() + timeout
    closed = 0
    while wanted and closed < 2:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            tag, line = sink.get(timeout=left)
        except queue.Empty:
            return False
        if line is None:
            closed += 1
            continue
        (out if tag == "out" else err).append(line)
        if tag == "out":
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):
                if msg.get("id") in wanted:
                    wanted.discard(msg["id"])
                if msg.get("id") is None and (msg.get("error") or {}).get("code") == -32700:
                    wanted.discard("parse")
    return not wanted


def stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def report(out: list[str], err: list[str], complete: bool) -> bool:
    stray: list[str] = []
    messages: list[dict[str, Any]] = []
    for line in out:
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and is_message(obj):
            messages.append(obj)
        else:
            stray.append(line)
    by_id = {m.get("id"): m for m in messages if "id" in m}
    parse_error = any(m.get("id") is None and (m.get("error") or {}).get("code") == -32700 for m in messages)
    checks = [
        ("stdout-lines", not stray, f"{len(messages)} messages, {len(stray)} stray lines"),
        ("initialize", "result" in by_id.get(1, {}), "handshake answered" if 1 in by_id else "no answer"),
        ("parse-error", parse_error, "-32700 with id null" if parse_error else "no -32700 with id null"),
        ("still-serving", 2 in by_id and 3 in by_id, "ping and tools/list answered"
         if 2 in by_id and 3 in by_id else "missing answers after the malformed line"),
    ]
    ok = all(passed for _, passed, _ in checks)
    for name, passed, detail in checks:
        say(f"{'ok  ' if passed else 'FAIL'} {name}: {detail}")
    json_err = sum(1 for line in err if line.strip().startswith("{"))
    say(f"info stderr: {len(err)} lines, {json_err} look like JSON objects")
    if not complete:
        say("info some answers did not arrive before the deadline")
    for line in stray[:20]:
        say(f"     stray stdout: {line.rstrip()[:200]!r}")
    tools = by_id.get(3, {}).get("result", {}).get("tools", [])
    if tools:
        say("info tools: " + ", ".join(sorted(t.get("name", "?") for t in tools)))
    say("PASS" if ok else "FAIL")
    return ok


def main(argv: list[str]) -> int:
    try:
        timeout, protocol, command = parse_args(argv)
    except ValueError:
        say("usage: check_stdout.py [--timeout SECONDS] [--protocol VERSION] [-- COMMAND ARG...]")
        return 2
    command = command or default_command()
    if not command:
        say("cannot find skill-mcp; pass the server command after --, with an absolute path")
        return 2
    say("command: " + " ".join(command))
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace")
    except OSError as exc:
        say(f"cannot start the command: {exc.strerror}")
        return 2
    sink: queue.Queue[Line] = queue.Queue()
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    for stream, tag in ((proc.stdout, "out"), (proc.stderr, "err")):
        threading.Thread(target=pump, args=(stream, sink, tag), daemon=True).start()
    out: list[str] = []
    err: list[str] = []
    complete = False
    try:
        for line in requests(protocol):
            proc.stdin.write(line)
        proc.stdin.flush()
        complete = collect(sink, out, err, timeout)
    except BrokenPipeError:
        pass
    finally:
        stop(proc)
    drain(sink, out, err)
    return 0 if report(out, err, complete) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
