"""``egress.allowed_hosts``: the broker's one decision of which hosts a run may reach.

Denials proved: a requested host outside the granted ones is refused (``egress-not-granted``),
not dropped; a granted entry the proxy cannot hold to (an address, a wildcard) is never let
through. Positive control: a granted host a request names, or every granted host when the
request names none, is allowed.
"""

from __future__ import annotations

import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp_launcher.egress import allowed_hosts

GRANTED = ("api.example.com", "files.example.org")


@pytest.mark.parametrize(
    ("granted", "requested", "allowed"),
    [
        (GRANTED, None, GRANTED),  # the request names none: all granted
        (GRANTED, ("files.example.org",), ("files.example.org",)),  # narrowed to what it names
        (GRANTED, (), ()),  # narrowed to nothing
        (("api.example.com", "10.0.0.1", "*.example.com"), None, ("api.example.com",)),  # not host names: dropped
        ((), None, ()),
    ],
)
def test_the_hosts_a_run_may_reach(
    granted: tuple[str, ...], requested: tuple[str, ...] | None, allowed: tuple[str, ...]
) -> None:
    assert allowed_hosts(granted, requested) == allowed


@pytest.mark.parametrize("requested", [("evil.example",), ("api.example.com", "evil.example"), ("10.0.0.1",)])
def test_a_requested_host_outside_the_granted_ones_is_refused(requested: tuple[str, ...]) -> None:
    with pytest.raises(SkillMcpError) as refused:
        allowed_hosts((*GRANTED, "10.0.0.1"), requested)
    assert refused.value.reason == "egress-not-granted"
