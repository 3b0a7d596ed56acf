"""What the fence refused during one run: host names from the proxy, a count from the ruleset.

Two sources, both read by the launcher and reduced to names and counts before anything leaves
it (never a URL, a path, a header or a body):

- **The proxy's log.** tinyproxy, at ``LogLevel Connect``, writes one line per event to its
  standard output, which is a pipe to the launcher. ``ProxyLog.feed`` keeps only two shapes:
  ``Established connection to host "NAME"`` (an allowed host was reached) and
  ``Proxying refused on filtered domain "NAME"`` (a host the run's allowlist does not name).
  Every other line - the request lines carry whole URLs - is discarded as it is read. Lines are
  cut at ``MAX_LINE``, names must pass ``proxy.valid_host``, and at most ``MAX_HOSTS`` of each
  kind are kept: the proxy serves the script's traffic and is not trusted to be polite.
- **The ruleset's log.** ``nftables/skill-mcp.nft`` logs to a netlink group (``LOG_GROUP``)
  each packet of the script uid that opens a connection anywhere but the proxy
  (retransmissions included) just before the policy drops it. ``DropLog`` is bound to that
  group at boot and counts the messages of each run (see its docstring for why the capability
  drop does not stop it).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import struct
from dataclasses import dataclass, field

from skill_mcp_launcher import proxy

MAX_LINE = 8192
MAX_HOSTS = 64
TABLE = "skill_mcp"
COUNTER = "script-direct"

_ALLOWED = re.compile(rb'Established connection to host "([^"\s]{1,253})"')
_REFUSED = re.compile(rb'Proxying refused on filtered domain "([^"\s]{1,253})"')


@dataclass(slots=True)
class ProxyLog:
    """An incremental, bounded reader of one run's proxy output."""

    allowed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    _partial: bytearray = field(default_factory=bytearray)
    _skipping: bool = False

    def feed(self, chunk: bytes) -> None:
        *lines, tail = chunk.split(b"\n")
        for piece in lines:
            if not self._skipping:
                self._line(bytes(self._partial) + piece)
            self._partial.clear()
            self._skipping = False
        if self._skipping:
            return
        if len(self._partial) + len(tail) > MAX_LINE:
            self._partial.clear()
            self._skipping = True  # the rest of an over-long line is never a line of ours
        else:
            self._partial += tail

    def _line(self, line: bytes) -> None:
        if self._skipping or len(line) > MAX_LINE:
            return
        for pattern, bucket in ((_REFUSED, self.refused), (_ALLOWED, self.allowed)):
            match = pattern.search(line)
            if match is None:
                continue
            name = match.group(1).decode("ascii", "replace").lower()
            if proxy.valid_host(name) and name not in bucket and len(bucket) < MAX_HOSTS:
                bucket.append(name)
            return


# nfnetlink_log (linux/netfilter/nfnetlink_log.h): the ruleset logs each dropped connection
# attempt of the script uid to a netlink group; the kernel sends one message per packet.
_NETLINK_NETFILTER = 12
_NFNL_SUBSYS_ULOG = 4
_NFULNL_MSG_PACKET, _NFULNL_MSG_CONFIG = 0, 1
_NFULA_CFG_CMD, _NFULA_CFG_MODE, _NFULA_CFG_TIMEOUT, _NFULA_CFG_QTHRESH = 1, 2, 4, 5
_NFULNL_CFG_CMD_BIND = 1
_NFULNL_COPY_META = 1
_NLM_F_REQUEST, _NLM_F_ACK = 0x1, 0x4
_NLMSG_ERROR = 2
_NLMSG = struct.Struct("=IHHII")
_NFGEN = struct.Struct("=BBH")
_NLA = struct.Struct("=HH")
LOG_GROUP = 7  # the ruleset's ``log group``; nftables/skill-mcp.nft names the same number


def _attr(kind: int, payload: bytes) -> bytes:
    body = _NLA.pack(_NLA.size + len(payload), kind) + payload
    return body + b"\0" * (-len(body) % 4)


def config_message(group: int, seq: int) -> bytes:
    """Bind ``group``, copy no packet bytes, and deliver each message at once (no batching)."""
    payload = (
        _NFGEN.pack(socket.AF_UNSPEC, 0, socket.htons(group))
        + _attr(_NFULA_CFG_CMD, bytes([_NFULNL_CFG_CMD_BIND]))
        + _attr(_NFULA_CFG_MODE, struct.pack(">IBB", 0, _NFULNL_COPY_META, 0))
        + _attr(_NFULA_CFG_QTHRESH, struct.pack(">I", 1))
        + _attr(_NFULA_CFG_TIMEOUT, struct.pack(">I", 0))
    )
    kind = (_NFNL_SUBSYS_ULOG << 8) | _NFULNL_MSG_CONFIG
    return _NLMSG.pack(_NLMSG.size + len(payload), kind, _NLM_F_REQUEST | _NLM_F_ACK, seq, 0) + payload


def acked(reply: bytes) -> bool:
    """True when ``reply`` is the kernel's ACK (an error message with code 0)."""
    if len(reply) < _NLMSG.size + 4:
        return False
    _, kind, _, _, _ = _NLMSG.unpack_from(reply)
    code: int = struct.unpack_from("=i", reply, _NLMSG.size)[0]
    return kind == _NLMSG_ERROR and code == 0


def packets(data: bytes) -> int:
    """How many log messages (one per logged packet) ``data`` holds."""
    count, at = 0, 0
    while at + _NLMSG.size <= len(data):
        length, kind, _, _, _ = _NLMSG.unpack_from(data, at)
        if length < _NLMSG.size:
            break
        count += kind == (_NFNL_SUBSYS_ULOG << 8) | _NFULNL_MSG_PACKET
        at += (length + 3) & ~3
    return count


@dataclass(slots=True)
class DropLog:
    """Counts the connection attempts the ruleset dropped for the script uid.

    Bound at boot while the launcher still holds ``CAP_NET_ADMIN`` (binding a log group needs
    it); receiving what the kernel sends to a bound socket does not, so it keeps counting after
    the capability drop, and no other process can bind the group or change the ruleset.
    ``take`` drains what arrived since the last call. A socket buffer that overflowed loses
    messages: the count is then a lower bound, and ``take`` says so.
    """

    sock: socket.socket | None
    overrun: bool = False

    @classmethod
    def open(cls, group: int = LOG_GROUP) -> DropLog:
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, _NETLINK_NETFILTER)
            sock.settimeout(1.0)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            sock.send(config_message(group, 1))
            if not acked(sock.recv(65536)):
                sock.close()
                return cls(None)
            sock.setblocking(False)
        except OSError:
            return cls(None)
        return cls(sock)

    def take(self) -> tuple[int | None, bool]:
        """(attempts dropped since the last call, whether that is a lower bound); None: not counted."""
        if self.sock is None:
            return None, False
        count, lower = 0, self.overrun
        self.overrun = False
        for _ in range(4096):
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: the kernel dropped messages for us
                lower = True
                continue
            count += packets(data)
        return count, lower

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


def report(log: ProxyLog | None, direct: tuple[int | None, bool]) -> dict[str, object]:
    """The run result's ``egress`` object: names and counts only."""
    out: dict[str, object] = {"allowed": list(log.allowed) if log else [], "refused": list(log.refused) if log else []}
    out["directDropped"] = direct[0]
    if direct[1]:
        out["directDroppedAtLeast"] = True
    return out


def grant_notes(skill: str, script: str, refused: list[str], declared: tuple[str, ...]) -> list[str]:
    """One line for the model per refused host: which grant would allow it, or that the skill's
    author must declare it first (a grant never reaches a host the declaration does not name)."""
    wanted = {h.lower() for h in declared}
    granted = [h for h in refused if h in wanted]
    undeclared = [h for h in refused if h not in wanted]
    notes = []
    if granted:
        notes.append(
            f"the egress proxy refused {', '.join(granted)}: declared by skill {skill} but not granted; the "
            f'owner can allow it with an MCP_SKILL_RUN row {{"skill": "{skill}", "script": '
            f'"{script}", "egress": [...]}} naming it'
        )
    if undeclared:
        notes.append(
            f"the egress proxy refused {', '.join(undeclared)}: not declared by skill {skill} "
            "(mcp-host: egress), so no grant can allow it; the skill's author must declare it"
        )
    return notes


def read_available(fd: int, log: ProxyLog, budget: int = 1 << 20) -> bool:
    """Feed what the proxy's pipe holds now (non-blocking), at most ``budget`` bytes; False at EOF."""
    while budget > 0:
        try:
            chunk = os.read(fd, min(65536, budget))
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        log.feed(chunk)
        budget -= len(chunk)
    return True
