"""Raw-socket attackers for the HTTP transport's connection limits (loopback only).

``Flood`` opens idle TCP connections (connected, nothing sent) and slow-header ones (a partial
request head, then one more byte every few seconds from a background thread), and says which
of them the server has closed. Every socket is non-blocking after its connect, so looking at
one never waits; every wait is bounded.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2

# A request head that never ends: the server has to wait for the rest of the header line.
PARTIAL_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
TRICKLE_EVERY_S = 2.0


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A connection to the server on 127.0.0.1 from ``source`` (any 127/8 address is loopback)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.setblocking(False)
    return sock


def is_closed(sock: socket.socket) -> bool:
    """True when the server has closed the connection (EOF or reset); never blocks. Whatever
    the server sent before (an answer) is read and dropped on the way."""
    try:
        while sock.recv(65536):
            pass
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


@dataclass
class Flood:
    port: int
    idle: list[socket.socket] = field(default_factory=list)
    slow: list[socket.socket] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def open_idle(self, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
        opened = [connect(self.port, source) for _ in range(count)]
        self.idle.extend(opened)
        return opened

    def open_slow(self, count: int) -> None:
        for _ in range(count):
            sock = connect(self.port)
            sock.send(PARTIAL_HEAD)
            self.slow.append(sock)
        if self._thread is None:
            self._thread = threading.Thread(target=self._trickle, daemon=True)
            self._thread.start()

    def _trickle(self) -> None:
        while not self._stop.wait(TRICKLE_EVERY_S):
            for sock in list(self.slow):
                try:
                    sock.send(b"a")
                except OSError:
                    pass  # closed by the server (or its buffer full): nothing to trickle into

    def open_count(self, socks: list[socket.socket]) -> int:
        return sum(not is_closed(s) for s in socks)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=TRICKLE_EVERY_S + 5)
        for sock in [*self.idle, *self.slow]:
            sock.close()


@contextmanager
def flood(port: int) -> Iterator[Flood]:
    attack = Flood(port)
    try:
        yield attack
    finally:
        attack.close()


def modern_tools_list(url: str, token: str, timeout: float = 20.0) -> httpx2.Response:
    """One authenticated 2026-07-28 ``tools/list`` on a new connection (no session, one round trip)."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
            }
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list",
    }
    with httpx2.Client(timeout=timeout) as http:
        return http.post(url, headers=headers, content=json.dumps(body))


def time_to_answer(url: str, token: str, give_up_after: float) -> tuple[float | None, list[int]]:
    """Ask until a 200 comes back, for at most ``give_up_after`` seconds: (seconds or None, statuses)."""
    started = time.monotonic()
    statuses: list[int] = []
    while time.monotonic() - started < give_up_after:
        try:
            response = modern_tools_list(url, token, timeout=max(give_up_after - (time.monotonic() - started), 0.1))
        except httpx2.TransportError:
            statuses.append(0)
            continue
        statuses.append(response.status_code)
        if response.status_code == 200:
            return time.monotonic() - started, statuses
        time.sleep(0.2)
    return None, statuses


def unread_post(port: int, token: str, body: dict[str, Any], headers: dict[str, str]) -> socket.socket:
    """A POST on its own connection whose answer its client does not read (a 4 KiB receive
    buffer, nothing taken from it); blocking, for the caller to read later if it wants."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    payload = json.dumps(body).encode()
    head = {
        "Host": f"127.0.0.1:{port}",
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Content-Length": str(len(payload)),
        **headers,
    }
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    sock.sendall(f"POST /mcp HTTP/1.1\r\n{lines}\r\n".encode() + payload)
    return sock


def read_request(
    uri: str, era: str, request_id: int, session: str | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of one ``resources/read`` of ``uri``: in ``session`` (handshake era,
    ``legacy``) or on its own (``2026-07-28``)."""
    if era == "legacy":
        assert session is not None
        params: dict[str, Any] = {"uri": uri}
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    else:
        meta = {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientInfo": {"name": "unread", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        params = {"uri": uri, "_meta": meta}
        headers = {"MCP-Protocol-Version": era, "Mcp-Method": "resources/read", "Mcp-Name": uri}
    return {"jsonrpc": "2.0", "id": request_id, "method": "resources/read", "params": params}, headers
