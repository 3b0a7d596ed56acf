"""Network denials in the appliance, through the real server and the SDK client.

Every address here belongs to a container this suite (or the appliance suite's ``peers`` fixture) started on a
network it created: the web peer (answering as allowed.test and other.test), that suite's DNS peer,
and this suite's rebinding DNS peer (every ``*.example`` name -> 127.0.0.1), which is the
container's only resolver and logs each query it gets. Loopback traffic stays inside the
appliance container. The owner's grant accepts allowed.test, rebind.example and
ext-allowed.example for ``scripts/probe.py`` and no host at all for ``scripts/short.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.appliance import AppServer
from tests.security.conftest import rebind_queries

pytestmark = pytest.mark.appliance
ALLOWED = "http://allowed.test/"


def _fetch(app: AppServer, url: str, script: str = "scripts/probe.py") -> dict[str, Any]:
    return app.session.probe("net", "proxy", url, script=script)["out"]


def _control(app: AppServer) -> None:
    assert _fetch(app, ALLOWED) == {"status": 200}


def test_accepted_host_answers_through_the_proxy(app: AppServer) -> None:
    assert _fetch(app, ALLOWED) == {"status": 200}
    assert _fetch(app, "http://allowed.test/?q=1#frag") == {"status": 200}


def test_direct_tcp_to_a_peer_times_out(app: AppServer, peers: dict) -> None:
    out = app.session.probe("net", "direct", f"{peers['web_ip']}:80")["out"]
    # Refused by the run's sandbox (TCP connect to the proxy's port only) before nftables, which
    # would drop it (a timeout): "403, refused or timeout", never a connection.
    assert out["errno"] == "EACCES", out
    _control(app)


def test_udp_to_the_dns_peer_gets_no_answer(app: AppServer, peers: dict) -> None:
    out = app.session.probe("net", "udp", peers["dns_ip"])["out"]
    assert "error" in out and out["errno"] in ("TimeoutError", "EPERM", "ETIMEDOUT")
    _control(app)


def test_dns_lookup_from_the_script_fails(app: AppServer) -> None:
    out = app.session.probe("net", "dns", "allowed.test")["out"]
    assert "error" in out
    _control(app)


@pytest.mark.parametrize("port", [8000, 22, 53])
def test_other_loopback_ports_are_unreachable(port: int, app: AppServer) -> None:
    out = app.session.probe("net", "direct", f"127.0.0.1:{port}")["out"]
    assert out.get("errno") == "EACCES", out  # the sandbox refuses at once; nftables would drop it
    # Positive control: loopback to the proxy port itself connects.
    assert app.session.probe("net", "direct", "127.0.0.1:8888")["out"] == {"direct": "connected"}


def test_script_that_ignores_the_proxy_variables_gets_nowhere(app: AppServer) -> None:
    out = app.session.probe("net", "noproxy", ALLOWED)["out"]
    assert "error" in out and "status" not in out
    _control(app)


@pytest.mark.parametrize(
    "url",
    [
        "http://other.test/",  # a host the owner did not accept
        "http://{web_ip}/",  # an IPv4 literal, even of the accepted host's address
        "http://[::1]/",  # an IPv6 literal
        "http://[::ffff:127.0.0.1]/",  # a v4-mapped IPv6 literal
        "http://2130706433/",  # a decimal IPv4 literal
        "http://allowed.test./",  # a trailing dot
        "http://allowed.test.evil.test/",  # a look-alike suffix
        "http://xallowed.test/",  # a look-alike prefix
        "http://allowed.test@other.test/",  # userinfo naming the accepted host
        "http://allowed.test:80@other.test/",  # userinfo with a port
        "http://ALLOWED.TEST.other.test/",  # case folding does not make a suffix match
    ],
    ids=[
        "refused_host",
        "ipv4_literal",
        "ipv6_literal",
        "v4_mapped_ipv6",
        "decimal_ipv4",
        "trailing_dot",
        "suffix_lookalike",
        "prefix_lookalike",
        "at_userinfo",
        "at_userinfo_port",
        "uppercase_suffix",
    ],
)
def test_proxy_refuses_with_403(url: str, app: AppServer, peers: dict) -> None:
    assert _fetch(app, url.format(web_ip=peers["web_ip"])) == {"status": 403}
    _control(app)


def test_connect_to_a_disallowed_port_is_refused(app: AppServer) -> None:
    out = app.session.probe("net", "connect", "allowed.test:22")["out"]
    assert " 403 " in out["connect"] + " ", out
    # Positive control: the allowed CONNECT port is not refused by policy (the peer speaks no TLS,
    # so the tunnel may fail afterwards - but not with a 403).
    ok = app.session.probe("net", "connect", "allowed.test:443")["out"]
    assert " 403 " not in ok.get("connect", "") + " "


def test_run_whose_script_has_no_accepted_host_gets_403(app: AppServer) -> None:
    assert _fetch(app, ALLOWED, script="scripts/short.py") == {"status": 403}  # empty allowlist for this run
    _control(app)


def test_refused_name_is_never_resolved(app: AppServer, rebind_dns: dict) -> None:
    secret = "exfil-4b1d.example"
    assert _fetch(app, f"http://{secret}/") == {"status": 403}
    assert not [q for q in rebind_queries(rebind_dns) if "exfil-4b1d" in q]
    # Positive control: an accepted name is resolved through this very DNS peer (so a lookup of
    # the refused one would have been logged).
    _fetch(app, "http://ext-allowed.example/")
    assert "ext-allowed.example" in rebind_queries(rebind_dns)


def test_dns_rebinding_to_loopback_is_refused(app: AppServer, rebind_dns: dict) -> None:
    """The proxy uid may not connect to loopback."""
    out = app.session.probe("rebind", "rebind.example", "18080")["out"]
    assert out["listener_hits"] == 0, out
    assert out["fetch"].get("status") != 200, out
    assert "rebind.example" in rebind_queries(rebind_dns)  # positive control: the name was resolved (to 127.0.0.1)
    _control(app)


def test_raw_socket_is_refused(app: AppServer) -> None:
    out = app.session.probe("net", "raw", "-")["out"]
    assert out.get("errno") == "EPERM"
    _control(app)


def test_server_uid_has_no_network(app: AppServer, peers: dict) -> None:
    code = (
        "import socket\ns=socket.socket();s.settimeout(3)\ntry:\n s.connect(('"
        + peers["web_ip"]
        + "',80));print('connected')\nexcept OSError as e:\n print(type(e).__name__)"
    )
    proc = app.exec("setpriv", "--reuid=10001", "--regid=10001", "--clear-groups", "/usr/bin/python3", "-c", code)
    assert proc.stdout.decode().strip() == "TimeoutError", proc.stderr.decode()[-500:]
    # Positive control: the same connection as the proxy uid (the only uid allowed out) connects.
    proc = app.exec("setpriv", "--reuid=10003", "--regid=10003", "--clear-groups", "/usr/bin/python3", "-c", code)
    assert proc.stdout.decode().strip() == "connected", proc.stderr.decode()[-500:]
