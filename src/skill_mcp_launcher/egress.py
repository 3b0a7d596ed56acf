"""Which hosts a run may reach (appliance): the broker's one decision, and where it is enforced.

``allowed_hosts`` decides, from the broker's own records only: the hosts the skill declares and
its owner granted (``grantrules.intersect``, through ``policy.Grants``), less any that is not a
host name the proxy can hold a connection to (``proxy.valid_host``), narrowed to those a request
names (a request may narrow, never widen). What it returns is written into the proxy's
allowlist for that run (``proxy.write_config``); the nftables ruleset
(``nftables/skill-mcp.nft``) lets only the proxy's uid leave the box, so a script reaches nothing
but the proxy, and the proxy nothing but these hosts (loaded and verified by ``fence``).
"""

from __future__ import annotations

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp_launcher.proxy import valid_host


def allowed_hosts(granted: tuple[str, ...], requested: tuple[str, ...] | None) -> tuple[str, ...]:
    """The hosts one run may reach: ``granted`` (declared and granted) that the proxy can hold to,
    narrowed to ``requested`` when the request names hosts; a requested host outside them is a
    refusal (``egress-not-granted``), never a silent drop."""
    usable = tuple(h for h in granted if valid_host(h))
    if requested is None:
        return usable
    for host in requested:
        if host not in usable:
            raise SkillMcpError(
                Refusal.EGRESS_NOT_GRANTED,
                f"{host!r} is not a host the skill declares and the owner granted",
                {"host": host, "granted": list(usable)},
            )
    return tuple(h for h in usable if h in requested)
