"""The balancer configuration the scale-out test and the load figure derive from docs/deploy.md."""

from __future__ import annotations

import pytest

from bench.cluster import documented_haproxy_cfg, server_names, with_servers, without_stickiness


def test_documented_config_balances_two_replicas_sticky_on_the_session_header() -> None:
    cfg = documented_haproxy_cfg()
    assert server_names(cfg) == ["skill-mcp-1", "skill-mcp-2"]
    rules = [line.split() for line in cfg.splitlines() if line.strip().startswith("stick")]
    assert ["stick", "store-response", "res.hdr(mcp-session-id)"] in rules
    assert ["stick", "match", "req.hdr(mcp-session-id)"] in rules


def test_with_servers_keeps_the_first_n_server_lines_and_nothing_else_changes() -> None:
    cfg = documented_haproxy_cfg()
    one = with_servers(cfg, 1)
    assert server_names(one) == ["skill-mcp-1"]
    assert [line for line in cfg.splitlines() if "skill-mcp-2" not in line] == one.splitlines()
    assert with_servers(cfg, 2) == cfg
    with pytest.raises(ValueError):
        with_servers(cfg, 3)


def test_without_stickiness_drops_only_the_stick_rules() -> None:
    cfg = documented_haproxy_cfg()
    plain = without_stickiness(cfg)
    assert "stick" not in plain
    assert server_names(plain) == server_names(cfg)
    assert len(cfg.splitlines()) - len(plain.splitlines()) == 3
