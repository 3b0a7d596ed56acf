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
answers 403 to everything: the seed promises "403 or timeout", never a connection refusal
that would distinguish the two.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass

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
    _write(conf, "\n".join([
        f"Port {port}",
        "Listen 127.0.0.1",
        "Allow 127.0.0.1",
        "Timeout 60",
        "MaxClients 32",
        "LogLevel Warning",
        "DisableViaHeader Yes",
        f'Filter "{filt}"',
        "FilterType ere",
        "FilterURLs No",
        "FilterDefaultDeny Yes",
        # HTTPS only through CONNECT to 443; plain HTTP requests are filtered the same way.
        "ConnectPort 443",
        "",
    ]))
    return ProxyFiles(config=conf, filter=filt)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def listening(port: int = PROXY_PORT) -> bool:
    """True when something listens on 127.0.0.1:``port`` (read from /proc, no packet sent)."""
    want = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/tcp", encoding="ascii") as fh:
            next(fh, None)
            for line in fh:
                parts = line.split()
                if len(parts) > 3 and parts[1] == want and parts[3] == "0A":
                    return True
    except OSError:
        return False
    return False


def argv(files: ProxyFiles) -> list[str]:
    # -d: stay in the foreground so the launcher owns and reaps it.
    return [TINYPROXY, "-d", "-c", files.config]
