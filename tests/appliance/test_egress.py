"""Egress: default-deny nftables, and the per-run hostname allowlist in the proxy.

The peers (a web server answering as allowed.test and other.test, and a logging DNS
server) are containers this suite started on a network it created.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.appliance.conftest import ALT_WEB_PORT, Appliance, _wait_http, dns_queries

pytestmark = pytest.mark.appliance

ALLOWED = ("allowed.test",)


def test_direct_tcp_from_script_is_refused(appliance: Appliance, peers: dict[str, Any]) -> None:
    direct = appliance.run("net", "direct", f"{peers['web_ip']}:80", egress=ALLOWED)["out"]
    # Refused at once by the run's sandbox (TCP connect to the proxy's port only); nftables would
    # drop it too (a timeout), as tests/security/test_appliance_network.py shows with the sandbox aside.
    assert direct["errno"] == "EACCES", direct
    # Positive control: the same host answers through the proxy when the run allows it.
    assert appliance.run("net", "proxy", "http://allowed.test/", egress=ALLOWED)["out"] == {"status": 200}


def test_udp_and_dns_from_script_fail(appliance: Appliance, peers: dict[str, Any]) -> None:
    assert "error" in appliance.run("net", "udp", peers["dns_ip"], egress=ALLOWED)["out"]
    assert "error" in appliance.run("net", "dns", "allowed.test", egress=ALLOWED)["out"]
    # Positive control: the proxy (its own uid) resolves and reaches that very name.
    assert appliance.run("net", "proxy", "http://allowed.test/", egress=ALLOWED)["out"] == {"status": 200}


@pytest.mark.parametrize(
    "url",
    [
        "http://other.test/",  # a host the run did not accept
        "http://{web_ip}/",  # an IP literal, even of the accepted host
        "http://allowed.test.evil.test/",  # a look-alike suffix
        "http://allowed.test./",  # a trailing dot
        "http://xallowed.test/",  # a look-alike prefix
    ],
)
def test_proxy_refuses_hosts_outside_the_run_allowlist(appliance: Appliance, peers: dict[str, Any], url: str) -> None:
    refused = appliance.run("net", "proxy", url.format(web_ip=peers["web_ip"]), egress=ALLOWED)["out"]
    assert refused == {"status": 403}
    assert appliance.run("net", "proxy", "http://allowed.test/", egress=ALLOWED)["out"] == {"status": 200}


def test_run_without_the_host_in_its_allowlist_gets_403(appliance: Appliance) -> None:
    # The same script, the same host; only the run's accepted egress differs.
    assert appliance.run("net", "proxy", "http://allowed.test/", skill="quiet")["out"] == {"status": 403}
    assert appliance.run("net", "proxy", "http://allowed.test/", egress=ALLOWED)["out"] == {"status": 200}


def test_plain_http_through_the_proxy_cannot_reach_another_port_of_an_allowed_host(
    appliance: Appliance, image: str, peers: dict[str, Any]
) -> None:
    # The peer does serve that port (seen from a throwaway container on the test network) ...
    _wait_http(image, peers["network"], url=f"http://allowed.test:{ALT_WEB_PORT}/")
    # ... but a run whose allowlist names the host reaches only its web ports through the proxy.
    other = appliance.run("net", "proxy", f"http://allowed.test:{ALT_WEB_PORT}/", "20", egress=ALLOWED)
    assert other["ok"] and other["out"].get("status") not in (None, 200), other["out"]
    # The positive control: port 80 of the same host, in the same kind of run.
    assert appliance.run("net", "proxy", "http://allowed.test:80/", egress=ALLOWED)["out"] == {"status": 200}


def test_https_connect_to_a_refused_host_gets_403(appliance: Appliance) -> None:
    out = appliance.run("net", "proxy", "https://other.test/", egress=ALLOWED)["out"]
    assert out["error"] == "URLError" and "403" in out["detail"]  # "Tunnel connection failed: 403"
    # Positive control: the tunnel to an accepted name is set up (the peer speaks no TLS, so
    # the handshake fails after the CONNECT succeeded - not with a 403).
    tunnel = appliance.run("net", "proxy", "https://allowed.test/", egress=ALLOWED)["out"]
    assert "403" not in tunnel.get("detail", "")


def test_refused_name_is_never_resolved(appliance: Appliance, peers: dict[str, Any]) -> None:
    secret = "leak-secret-data.example"
    assert appliance.run("net", "proxy", f"http://{secret}/", egress=ALLOWED)["out"] == {"status": 403}
    assert not [q for q in dns_queries(peers) if secret in q]
    # Positive control: an accepted name outside the test network is resolved through the
    # logging DNS peer (so the log would have shown the refused one too).
    accepted = "ext-allowed.example"
    assert appliance.run("net", "proxy", f"http://{accepted}/", egress=(accepted,))["out"] == {"status": 200}
    assert accepted in dns_queries(peers)


def test_allowed_name_resolving_to_loopback_does_not_reach_inside(appliance: Appliance, peers: dict[str, Any]) -> None:
    name = "loopback.rebind.example"
    out = appliance.run("rebind", name, "0", "6", egress=(name,))["out"]
    assert out["listen"] == "EACCES" and out["listener_hits"] == 0  # a script cannot even listen now
    assert out["fetch"].get("status") != 200
    # Positive control: the proxy did resolve the accepted name (so it tried, and the
    # ruleset stopped the connection), and a name resolving to a peer is fetched.
    assert name in dns_queries(peers)
    assert appliance.run("net", "proxy", "http://allowed.test/", egress=ALLOWED)["out"] == {"status": 200}


def test_server_uid_has_no_network(appliance: Appliance, peers: dict[str, Any]) -> None:
    code = (
        "import socket,sys\ntry:\n socket.create_connection((sys.argv[1], 80), timeout=3)\n print('connected')\n"
        "except OSError as e:\n print(type(e).__name__)\n"
    )
    out = appliance.request({"op": "exec", "argv": ["/usr/bin/python3", "-c", code, peers["web_ip"]]})
    assert out["stdout"].strip() == "TimeoutError", out
    # Positive control: the host is up and reachable through the proxy for an accepting run.
    assert appliance.run("net", "proxy", "http://allowed.test/", egress=ALLOWED)["out"] == {"status": 200}
