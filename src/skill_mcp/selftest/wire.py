"""A minimal MCP client over two pipes: newline-delimited JSON-RPC, bounded waits.

The self-test drives the real server the way any stdio client does (``initialize``, then
``tools/call skill_run`` with the confirmToken round trip). It is written against the wire
rather than the SDK's client because only ``surfaces`` imports ``mcp``, and the few messages
it needs are plain JSON. Every read has a deadline; every line read is kept (``seen``) so the
caller can look for what must never appear in the server's answers.
"""

from __future__ import annotations

import json
import os
import select
import time
from dataclasses import dataclass, field
from typing import Any

PROTOCOL = "2025-11-25"
MAX_LINE = 8 * 1024 * 1024


class WireError(RuntimeError):
    """The server did not answer in time, closed the pipe, or answered with a JSON-RPC error."""


@dataclass(slots=True)
class Wire:
    to_server: int
    from_server: int
    next_id: int = 1
    buffer: bytearray = field(default_factory=bytearray)
    seen: list[bytes] = field(default_factory=list)

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.to_server, data) :]

    def _line(self, deadline: float) -> bytes:
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WireError("the server did not answer in time")
            ready, _, _ = select.select([self.from_server], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.from_server, 65536)
            if not chunk:
                raise WireError("the server closed its output")
            self.buffer += chunk
            if len(self.buffer) > MAX_LINE:
                raise WireError("an answer line is too long")
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        self.seen.append(line)
        return line

    def request(self, method: str, params: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
        """Send one request; return its ``result``, skipping notifications and server requests."""
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self._line(deadline))
            if message.get("id") != rid or "method" in message:
                continue
            if "error" in message:
                raise WireError(f"{method}: JSON-RPC error {message['error']}")
            result: dict[str, Any] = message["result"]
            return result

    def initialize(self) -> dict[str, Any]:
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "skill-mcp-selftest", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def call(self, tool: str, arguments: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
        """A tool's structured result; a tool error comes back with ``isError`` set."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, timeout)
        out = dict(result.get("structuredContent") or {})
        if result.get("isError"):
            out["isError"] = True
        return out

    def skill_run(self, skill: str, script: str, args: list[str], timeout: float = 120.0) -> dict[str, Any]:
        """Preview, then confirm with the token: one real run, as a client that cannot elicit."""
        preview = self.call("skill_run", {"skill": skill, "script": script, "args": args}, timeout)
        if preview.get("status") != "confirmation-required":
            return preview
        return self.call(
            "skill_run",
            {"skill": skill, "script": script, "args": args, "confirmToken": preview["confirmToken"]},
            timeout,
        )
