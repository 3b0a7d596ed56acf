"""Where ``--metrics`` may put the scrape endpoint, decided before anything binds (a pure table)."""

from __future__ import annotations

import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.http.guard import decide_exposure
from skill_mcp.surfaces.http.metrics import MetricsPlan, decide_metrics

TOKEN = "plan-token-0123456789abcdef"
LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})


@pytest.mark.parametrize(
    ("bind", "token", "allowed", "spec", "expected"),
    [
        ("127.0.0.1", TOKEN, (), None, None),
        ("127.0.0.1", TOKEN, (), "/metrics", MetricsPlan(path="/metrics")),
        ("0.0.0.0", TOKEN, ("mcp.example.com",), "/metrics", MetricsPlan(path="/metrics")),
        ("127.0.0.1", None, (), "127.0.0.1:9464", MetricsPlan(host="127.0.0.1", port=9464, allowed_hosts=LOOPBACK)),
        (
            "0.0.0.0",
            TOKEN,
            ("mcp.example.com",),
            "0.0.0.0:9464",
            MetricsPlan(host="0.0.0.0", port=9464, allowed_hosts=frozenset({"mcp.example.com"})),
        ),
        (
            "127.0.0.1",
            TOKEN,
            (),
            "10.0.0.5:9464",
            MetricsPlan(host="10.0.0.5", port=9464, allowed_hosts=frozenset({"10.0.0.5"})),
        ),
    ],
)
def test_a_metrics_endpoint_is_placed_as_asked(
    bind: str, token: str | None, allowed: tuple[str, ...], spec: str | None, expected: MetricsPlan | None
) -> None:
    policy = decide_exposure(bind, 8000, token, token is None, allowed)
    assert decide_metrics(spec, policy, "/mcp") == expected


@pytest.mark.parametrize(
    ("bind", "token", "allowed", "spec", "reason"),
    [
        ("127.0.0.1", None, (), "/metrics", Refusal.HTTP_METRICS_UNAUTHENTICATED),
        ("127.0.0.1", TOKEN, (), "/mcp", Refusal.HTTP_ADDRESS_INVALID),
        ("127.0.0.1", TOKEN, (), "/metrics?x=1", Refusal.HTTP_ADDRESS_INVALID),
        ("127.0.0.1", TOKEN, (), "/a//b", Refusal.HTTP_ADDRESS_INVALID),
        ("127.0.0.1", TOKEN, (), "0.0.0.0:9464", Refusal.HTTP_ALLOWED_HOSTS_REQUIRED),
        ("127.0.0.1", TOKEN, (), "127.0.0.1:8000", Refusal.HTTP_ADDRESS_INVALID),
        ("127.0.0.1", TOKEN, (), "metrics", Refusal.HTTP_ADDRESS_INVALID),
    ],
)
def test_the_scrape_endpoint_cannot_be_placed_unsafely(
    bind: str, token: str | None, allowed: tuple[str, ...], spec: str, reason: Refusal
) -> None:
    policy = decide_exposure(bind, 8000, token, token is None, allowed)
    with pytest.raises(SkillMcpError) as caught:
        decide_metrics(spec, policy, "/mcp")
    assert caught.value.reason == reason
