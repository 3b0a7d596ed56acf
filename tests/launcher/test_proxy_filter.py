"""The proxy's allowlist lines: only plain DNS host names, anchored and escaped. No Docker."""

from __future__ import annotations

import re

import pytest

from skill_mcp_launcher.proxy import filter_lines, valid_host

REFUSED = [
    "",
    " allowed.test",
    "allowed.test.",
    ".allowed.test",
    "*.allowed.test",
    "allowed..test",
    "192.168.0.1",
    "[::1]",
    "::1",
    "0x7f.1",
    "127.1",
    "1.2.3.4",
    "allowed_test.example",
    "localhost",
    "a" * 64 + ".test",
    "allowed.test/path",
    "allowed.test:443",
    "-allowed.test",
    "allowed-.test",
    "xn--allowed.test\n",
    "allowed.test\x00.evil",
]
ACCEPTED = ["allowed.test", "api.weather.example", "Mixed.Case.Example", "xn--bcher-kva.example", "a-b.c0.example"]


@pytest.mark.parametrize("name", REFUSED)
def test_proxy_refuses_names_that_are_not_plain_dns_hosts(name: str) -> None:
    assert valid_host(name) is False
    assert filter_lines((name,)) == []


@pytest.mark.parametrize("name", ACCEPTED)
def test_proxy_accepts_plain_dns_hosts(name: str) -> None:
    assert valid_host(name) is True
    assert len(filter_lines((name,))) == 1


def test_filter_lines_match_whole_host_only() -> None:
    (line,) = filter_lines(("allowed.test",))
    pattern = re.compile(line, re.IGNORECASE)
    assert pattern.search("allowed.test")  # positive control
    for other in ("allowed.test.evil.test", "xallowed.test", "allowedxtest", "allowed.test.", "sub.allowed.test"):
        assert not pattern.search(other), other
