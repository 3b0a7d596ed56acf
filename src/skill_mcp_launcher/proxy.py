"""The egress proxy: Debian's tinyproxy, one process per run, as the proxy uid.

Why tinyproxy, and why one process per run: its domain filter with ``FilterDefaultDeny``
and anchored extended regular expressions gives exactly "these whole host names, nothing
else", and it checks the filter before it resolves a name, so a refused name is never
looked up. Starting a fresh process for each run with that run's filter file makes the
allowlist belong to the run: a reload signal would be asynchronous, and a script could race
it. Startup costs a few milliseconds (measured in docs/deploy.md).

Host names are validated here before a filter line is written: an IP literal, a trailing
dot, a wildcard or anything outside the DNS name syntax is dropped, so the filter can only
ever name whole DNS host names. A run whose allowlist is empty still gets a proxy, which
answers 403 to everything: a refused host is "403 or timeout" from inside a script, never a
connection refusal that would tell a refused name from a dropped address.

Tinyproxy takes no listening socket from its parent, so the launcher cannot hold the port for
it; ``judge`` instead proves, before a run, that every listener on the port (any address,
IPv4 and IPv6, from ``/proc/net/tcp*``) is a socket of the tinyproxy just started (its uid
and its inode), and the ruleset drops loopback packets from the port that a proxy-uid socket
did not send. Which ports the proxy may fetch from (80 and 443) is the ruleset's rule too, so
it does not depend on tinyproxy's parsing of a request line. See docs/deploy.md.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import sys
from dataclasses import dataclass
from enum import Enum

from skill_mcp.limits import PROXY_PORT as PROXY_PORT  # re-exported: one home, the sandbox rule names it too

TINYPROXY = "/usr/bin/tinyproxy"
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def valid_host(name: object) -> bool:
    """True for a plain DNS host name: labels of letters, digits, inner hyphens; no IP literal."""
    if not isinstance(name, str) or not name or len(name) > 253 or name != name.strip():
        return False
    lowered = name.lower()
    try:
        ipaddress.ip_address(lowered.strip("[]"))
        return False
    except ValueError:
        pass
    labels = lowered.split(".")
    if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
        return False
    # A name whose last label is all digits is an IPv4 literal in disguise (``1.2.3.4``,
    # ``0x7f.1``); resolvers differ on those, so none is allowed.
    return not labels[-1].isdigit()


def filter_lines(hosts: tuple[str, ...]) -> list[str]:
    """Anchored, escaped, whole-host ERE lines for the hosts that pass ``valid_host``."""
    out = []
    for host in sorted({h.lower() for h in hosts if valid_host(h)}):
        out.append("^" + re.escape(host).replace("\\-", "-") + "$")
    return out


@dataclass(frozen=True, slots=True)
class ProxyFiles:
    config: str
    filter: str


def write_config(run_dir: str, hosts: tuple[str, ...], *, port: int = PROXY_PORT) -> ProxyFiles:
    """Write the tinyproxy config and filter for one run into ``run_dir`` (root-owned, 0644)."""
    filt = os.path.join(run_dir, "filter")
    conf = os.path.join(run_dir, "tinyproxy.conf")
    lines = filter_lines(hosts)
    _write(filt, "".join(line + "\n" for line in lines))
    _write(
        conf,
        "\n".join(
            [
                f"Port {port}",
                "Listen 127.0.0.1",
                "Allow 127.0.0.1",
                "Timeout 60",
                "MaxClients 32",
                # Connect: one line when a host is reached or refused (egress_report keeps only the names).
                "LogLevel Connect",
                "DisableViaHeader Yes",
                f'Filter "{filt}"',
                "FilterType ere",
                "FilterURLs No",
                "FilterDefaultDeny Yes",
                # HTTPS only through CONNECT to 443; plain HTTP requests are filtered by host the same
                # way, and the ruleset lets the proxy uid reach only TCP 80 and 443 (and DNS).
                "ConnectPort 443",
                "",
            ]
        ),
    )
    return ProxyFiles(config=conf, filter=filt)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


@dataclass(frozen=True, slots=True)
class Listener:
    """One TCP socket in LISTEN state, as the kernel's ``/proc/net/tcp`` or ``tcp6`` shows it."""

    address: str  # the local address, printed: "127.0.0.1", "0.0.0.0", "::", "::ffff:127.0.0.1"
    port: int
    uid: int  # the socket's owner: the fsuid of the process that created it
    inode: int


_LISTEN = "0A"


def _address(hex_addr: str) -> str:
    # The kernel prints each 32-bit word of the address as a native-endian integer.
    raw = b"".join(int(hex_addr[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(hex_addr), 8))
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


def parse_listeners(text: str, port: int) -> tuple[Listener, ...]:
    """The LISTEN sockets on ``port`` in one ``/proc/net/tcp`` or ``tcp6`` text (any address)."""
    found = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or parts[3] != _LISTEN or ":" not in parts[1]:
            continue
        hex_addr, hex_port = parts[1].rsplit(":", 1)
        try:
            if int(hex_port, 16) != port:
                continue
            found.append(Listener(_address(hex_addr), port, int(parts[7]), int(parts[9])))
        except ValueError:
            continue
    return tuple(found)


def read_listeners(port: int = PROXY_PORT) -> tuple[Listener, ...]:
    """Every LISTEN socket on ``port``, IPv4 and IPv6, any address (read from /proc, no packet sent)."""
    found: list[Listener] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                found.extend(parse_listeners(fh.read(), port))
        except OSError:
            continue  # no IPv6 in this kernel: nothing can listen there either
    return tuple(found)


def socket_inodes(fd_dir: str) -> frozenset[int]:
    """The socket inodes among a process's descriptors (``/proc/<pid>/fd``'s ``socket:[N]`` links)."""
    inodes = set()
    for name in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            link = os.readlink(os.path.join(fd_dir, name))
            if link.startswith("socket:[") and link.endswith("]"):
                inodes.add(int(link[8:-1]))
    return frozenset(inodes)


class Verdict(Enum):
    OURS = "ours"  # the proxy's own socket listens on 127.0.0.1, and nothing else on the port
    WAIT = "wait"  # nothing listens yet
    FOREIGN = "foreign"  # a socket the proxy does not hold is bound to the port


def judge(
    listeners: tuple[Listener, ...],
    proxy_uid: int,
    inodes: frozenset[int] | None = None,
) -> tuple[Verdict, str]:
    """Is the listener on the proxy's port the proxy's, and the only one? (pure; table-tested)

    Every LISTEN socket on the port, on any address and in either family, must be owned by
    the proxy uid - and, once ``inodes`` (the proxy process's own socket inodes) are known,
    be one of them; one listens on 127.0.0.1, the only address scripts may reach.
    """
    for one in listeners:
        if one.uid != proxy_uid:
            return Verdict.FOREIGN, f"uid {one.uid} listens on {one.address}:{one.port}"
        if inodes is not None and one.inode not in inodes:
            return Verdict.FOREIGN, f"a socket the proxy does not hold listens on {one.address}:{one.port}"
    if not any(one.address == "127.0.0.1" for one in listeners):
        return Verdict.WAIT, "nothing listens on 127.0.0.1 yet"
    return Verdict.OURS, "the proxy's own socket is the only listener"


def argv(files: ProxyFiles) -> list[str]:
    # -d: stay in the foreground so the launcher owns and reaps it.
    return [TINYPROXY, "-d", "-c", files.config]
