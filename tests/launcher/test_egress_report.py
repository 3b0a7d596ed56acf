"""The fence's egress report: names from the proxy's log, a count from the ruleset, nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from skill_mcp_launcher.egress_report import MAX_HOSTS, MAX_LINE, ProxyLog, acked, packets, report

REFUSED = b'NOTICE    Dec 01 23:31:19.469 [6652]: Proxying refused on filtered domain "refused.example"\n'
ALLOWED = b'CONNECT   Dec 01 23:31:19.374 [6652]: Established connection to host "api.allowed.test" using fd 5.\n'
REQUEST = b"CONNECT   Dec 01 23:31:19.357 [6652]: Request (file descriptor 4): GET http://api.allowed.test/secret?token=abc HTTP/1.1\n"


def test_only_host_names_come_out_of_the_proxy_log_never_a_url() -> None:
    log = ProxyLog()
    log.feed(REQUEST + ALLOWED + REFUSED)
    assert (log.allowed, log.refused) == (["api.allowed.test"], ["refused.example"])
    assert "secret" not in repr(report(log, (0, False))) and "token" not in repr(report(log, (0, False)))


def test_lines_split_across_reads_are_joined() -> None:
    log = ProxyLog()
    for i in range(0, len(REFUSED), 7):
        log.feed(REFUSED[i : i + 7])
    assert log.refused == ["refused.example"]


@pytest.mark.parametrize(
    "line",
    [
        b'Proxying refused on filtered domain "1.2.3.4"\n',  # an IP literal is no host name
        b'Proxying refused on filtered domain "evil..name"\n',
        b'Proxying refused on filtered domain "x" "y"\n' + b"z" * 10,
    ],
)
def test_a_name_that_is_no_host_name_is_dropped(line: bytes) -> None:
    log = ProxyLog()
    log.feed(line + REFUSED)
    assert log.refused == ["refused.example"]


def test_an_over_long_line_is_skipped_whole_and_the_next_line_still_counts() -> None:
    log = ProxyLog()
    log.feed(b"x" * (MAX_LINE + 10))
    log.feed(b'Proxying refused on filtered domain "hidden.example"\n' + REFUSED)
    assert log.refused == ["refused.example"]


def test_hosts_are_kept_once_and_at_most_a_bounded_number() -> None:
    log = ProxyLog()
    for i in range(MAX_HOSTS + 20):
        log.feed(b'Proxying refused on filtered domain "h%d.example"\n' % i + REFUSED)
    assert len(log.refused) == MAX_HOSTS and len(set(log.refused)) == MAX_HOSTS


def test_netlink_replies_that_are_not_an_ack_or_a_log_message_count_nothing() -> None:
    assert packets(b"") == 0 and not acked(b"")
    error = (
        (20).to_bytes(4, sys.byteorder)
        + (2).to_bytes(2, sys.byteorder)
        + b"\0" * 10
        + (-1).to_bytes(4, sys.byteorder, signed=True)
    )
    assert not acked(error) and packets(error) == 0


CHILD = r"""
import os, socket, subprocess
from skill_mcp_launcher.egress_report import DropLog, LOG_GROUP
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
rules = f'''table inet skill_mcp {{
  chain output {{
    type filter hook output priority 0; policy accept;
    meta skuid 65534 ct state new log group {LOG_GROUP} drop
  }}
}}
'''
subprocess.run(["nft", "-f", "-"], input=rules.encode(), check=True)
log = DropLog.open()                          # bound while root holds CAP_NET_ADMIN
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
late = DropLog.open()                         # control: bound without the capability
for port in (9, 10, 11):
    s = socket.socket(); s.setblocking(False)
    try: s.connect(("127.0.0.1", port))
    except OSError: pass
    s.close()
import time; time.sleep(0.2)
first, second, refused = log.take(), log.take(), late.take()
print(first[0], second[0], refused[0])
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nft"),
    reason="needs root, util-linux unshare and nft",
)
def test_the_drop_log_bound_at_boot_still_counts_after_the_capability_drop() -> None:
    done = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    first, second, refused = done.stdout.split()
    assert int(first) >= 3 and second == "0"
    assert refused == "None"  # a socket without the capability cannot bind the group
