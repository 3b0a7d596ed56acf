"""The proxy is the proxy: the listener a script reaches is the socket of the tinyproxy the broker
started, or the run is refused (``fence-unavailable``) and nothing is run.

The first half needs no Docker: the parse of ``/proc/net/tcp``/``tcp6`` and the judgement, as
tables, and the parse against a real listener of this process. The second half squats the port
in the real image as the server uid, the way a compromised server would, and records every
byte that reaches it.
"""

from __future__ import annotations

import os
import socket
import subprocess
from typing import Any

import pytest

from skill_mcp_launcher.proxy import Listener, Verdict, judge, parse_listeners, read_listeners, socket_inodes
from tests.appliance.conftest import GRANT_ROWS, Appliance

PROXY, SERVER = 10003, 10001
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
TCP = (
    HEADER
    + """
   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000 10003        0 4242 1 0 100 0 0 10 0
   1: 0100007F:22B8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000 10003        0 4343 1 0 20 4 30 10 -1
   2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1 0 100 0 0 10 0
"""
)
TCP6 = (
    HEADER
    + """
   0: 00000000000000000000000000000000:22B8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        0 777 1 0 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:22B8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        0 778 1 0 100 0 0 10 0
"""
)


def test_parse_reads_listeners_on_the_port_only() -> None:
    assert parse_listeners(TCP, 8888) == (Listener("127.0.0.1", 8888, PROXY, 4242),)  # not the connection
    assert parse_listeners(TCP, 80) == (Listener("0.0.0.0", 80, 0, 99),)
    assert parse_listeners(TCP6, 8888) == (
        Listener("::", 8888, SERVER, 777),
        Listener("::ffff:127.0.0.1", 8888, SERVER, 778),
    )
    assert parse_listeners("garbage\n 0: zz:zz 0A", 8888) == ()


OURS = Listener("127.0.0.1", 8888, PROXY, 1)


@pytest.mark.parametrize(
    ("listeners", "inodes", "verdict"),
    [
        ((OURS,), None, Verdict.OURS),
        ((OURS,), frozenset({1, 5}), Verdict.OURS),
        ((), None, Verdict.WAIT),
        ((Listener("::1", 8888, PROXY, 1),), None, Verdict.WAIT),  # not where scripts connect
        ((Listener("127.0.0.1", 8888, SERVER, 2),), None, Verdict.FOREIGN),  # the squatter bound first
        ((Listener("0.0.0.0", 8888, SERVER, 2),), None, Verdict.FOREIGN),  # any address counts
        ((Listener("::", 8888, SERVER, 2),), None, Verdict.FOREIGN),  # IPv6 too
        ((OURS, Listener("::ffff:127.0.0.1", 8888, 10002, 3)), None, Verdict.FOREIGN),  # beside ours
        ((OURS,), frozenset({7}), Verdict.FOREIGN),  # the proxy uid's socket, but not this tinyproxy's
        ((OURS, Listener("127.0.0.1", 8888, PROXY, 9)), frozenset({1}), Verdict.FOREIGN),  # a reuseport twin
    ],
)
def test_judge_accepts_only_the_proxys_own_socket(
    listeners: tuple[Listener, ...], inodes: frozenset[int] | None, verdict: Verdict
) -> None:
    assert judge(listeners, PROXY, inodes)[0] is verdict


def test_a_real_listener_is_found_with_its_uid_and_inode() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        found = read_listeners(port)
        inodes = socket_inodes(f"/proc/{os.getpid()}/fd")
        assert [(one.address, one.uid) for one in found] == [("127.0.0.1", os.getuid())]
        assert found[0].inode in inodes and os.fstat(sock.fileno()).st_ino == found[0].inode
        assert judge(found, os.getuid(), inodes)[0] is Verdict.OURS
    assert read_listeners(port) == ()  # closed: gone (the positive control of the parse)


# --- in the real image -----------------------------------------------------------------------

SQUATTER = r"""
import select, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8888))
s.listen(16)
print("READY", flush=True)
total, conns = 0, []
while True:
    ready, _, _ = select.select([s, sys.stdin, *conns], [], [])
    if sys.stdin in ready:
        break
    for r in ready:
        if r is s:
            conns.append(s.accept()[0])
        elif r is not sys.stdin:
            data = r.recv(65536)
            total += len(data)
            if not data:
                conns.remove(r)
print("BYTES", total, flush=True)
"""


def _squat(app: Appliance) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        ["docker", "exec", "-i", "-u", str(SERVER), app.name, "/usr/bin/python3", "-u", "-c", SQUATTER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "READY", proc.stderr.read() if proc.stderr else ""
    return proc


def _received(squatter: subprocess.Popen[str]) -> int:
    out, err = squatter.communicate(timeout=60)  # stdin closed: it reports and exits
    last = out.strip().splitlines()[-1].split()
    assert last[0] == "BYTES", err
    return int(last[1])


@pytest.fixture(scope="module")
def app(image: str, peers: dict[str, Any]) -> Any:
    appliance = Appliance(image, extra=["--network", peers["network"], "--dns", peers["dns_ip"]])
    try:
        assert appliance.request({"op": "hello"})["ok"]
        yield appliance
    finally:
        appliance.close()


@pytest.mark.appliance
def test_script_cannot_send_its_request_to_a_server_uid_process_squatting_the_proxy_port(app: Appliance) -> None:
    assert GRANT_ROWS[0]["skill"] == "probe" and "allowed.test" in GRANT_ROWS[0]["egress"]
    squatter = _squat(app)
    try:
        refused = app.run("net", "proxy", "http://allowed.test/?token=canary", egress=("allowed.test",))
    finally:
        received = _received(squatter)
    assert refused["ok"] is False and refused["reason"] == "fence-unavailable", refused
    assert received == 0
    # The positive control: with the squatter gone, the same run goes through the real proxy.
    assert app.run("net", "proxy", "http://allowed.test/", egress=("allowed.test",))["out"] == {"status": 200}


@pytest.mark.appliance
def test_squatter_on_the_proxy_port_cannot_complete_a_handshake(app: Appliance) -> None:
    # Kernel-side, with no run in progress: a script-uid connection to a server-uid listener on
    # 127.0.0.1:8888 never completes (the ruleset drops its SYN-ACK), so no byte is received.
    squatter = _squat(app)
    probe = (
        "import socket\ns = socket.socket(); s.settimeout(3)\ntry:\n s.connect(('127.0.0.1', 8888));"
        " s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print('connected')\nexcept OSError as e: print(type(e).__name__)"
    )
    try:
        done = subprocess.run(
            ["docker", "exec", "-u", "10002", app.name, "/usr/bin/python3", "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        received = _received(squatter)
    assert done.stdout.strip() == "TimeoutError" and received == 0, done
    # The positive control: the proxy's own port answers a script during a run.
    assert app.run("net", "proxy", "http://allowed.test/", egress=("allowed.test",))["out"] == {"status": 200}
