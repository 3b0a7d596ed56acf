"""A stand-in server for appliance tests: JSON lines on stdin -> broker frames on fd 3.

The launcher starts it exactly as it starts the real server (server uid, no capabilities,
no-new-privileges), so what it observes is what the server would.
Besides forwarding ``{"op": ...}`` requests it answers ``{"op": "self"}`` with its own
identity, capabilities and environment, for the posture tests; ``{"op": "run-and-die", "run": ...}``
starts a run and exits while it is in progress; ``{"op": "deep", "depth": n}`` sends one frame
nested ``n`` deep and reports the broker's answer, or that it closed the connection. It plays
the compromised server too: it forwards whatever request a test writes, forged or not.
"""

import json
import os
import socket
import subprocess
import sys
import time

from skill_mcp import brokerwire as protocol


def _self() -> dict:
    status = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    return {
        "ok": True,
        "pid": os.getpid(),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "status": {k: status.get(k) for k in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd", "NoNewPrivs")},
        "environ_owner": os.stat("/proc/self/environ").st_uid,
        "env_names": sorted(os.environ),
    }


def _procs() -> dict:
    """Every process in the container: pid, real uid, state (Z for zombies)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii") as fh:
                fields = dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
        except OSError:
            continue
        out.append(
            {
                "pid": int(entry),
                "uid": int(fields["Uid"].split()[0]),
                "state": fields["State"][:1],
                "name": fields["Name"],
            }
        )
    return {"ok": True, "procs": out}


def _exec(argv: list) -> dict:
    proc = subprocess.run(argv, capture_output=True, timeout=20, check=False)
    return {
        "ok": True,
        "rc": proc.returncode,
        "stdout": proc.stdout.decode(errors="replace")[-4000:],
        "stderr": proc.stderr.decode(errors="replace")[-4000:],
    }


def _run_and_die(sock: socket.socket, request: dict) -> None:
    """Send a run, wait (bounded) until the script is running, report its pids, then die.

    The server dying mid-run: the broker must end the run at once, not at its timeout.
    """
    protocol.send(sock, {"v": protocol.VERSION, "id": 0, "op": "run", "run": request["run"]})
    deadline = time.monotonic() + 30
    pids: list = []
    while not pids and time.monotonic() < deadline:
        pids = [p["pid"] for p in _procs()["procs"] if p["uid"] == 10002]
        time.sleep(0.02)
    sys.stdout.write(json.dumps({"ok": bool(pids), "script_pids": pids}) + "\n")
    sys.stdout.flush()
    os._exit(0)


def _deep(sock: socket.socket, depth: int, n: int) -> dict:
    body = b'{"v":2,"id":%d,"op":' % n + b"[" * depth + b"]" * depth + b"}"
    sock.sendall(protocol._HEADER.pack(len(body)) + body)
    try:
        reply = protocol.recv(sock, first_byte_timeout=None, frame_timeout=60.0)
    except (OSError, protocol.ProtocolError) as exc:
        return {"ok": False, "closed": True, "detail": str(exc)}
    return {"ok": False, "closed": True} if reply is None else {"ok": False, "closed": False, "reply": reply}


def main() -> int:
    sock = socket.socket(fileno=int(os.environ["SKILL_MCP_BROKER_FD"]))
    for n, line in enumerate(sys.stdin):
        request = json.loads(line)
        reply: dict | None  # None: the broker closed the connection
        if request.get("op") == "self":
            reply = _self()
        elif request.get("op") == "procs":
            reply = _procs()
        elif request.get("op") == "exec":
            reply = _exec(request["argv"])
        elif request.get("op") == "deep":
            reply = _deep(sock, int(request["depth"]), n)
        elif request.get("op") == "run-and-die":
            _run_and_die(sock, request)
        else:
            request.setdefault("v", protocol.VERSION)
            request.setdefault("id", n)
            protocol.send(sock, request)
            reply = protocol.recv(sock, first_byte_timeout=None, frame_timeout=60.0)
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
