"""A real ``Broker`` that can never spawn: for tests that drive the broker's decisions in process.

``fence_ok=False``, so a message that passes every check is still refused
(``fence-unavailable``) before anything is spawned; the roots do not exist and the accounts are
uids nobody on the machine holds.
"""

from __future__ import annotations

import sys

from skill_mcp_launcher import policy, procs
from skill_mcp_launcher.broker import Broker


def offline_broker(detail: str) -> Broker:
    users = procs.Users(*(procs.Account(n, u, u) for n, u in (("s", 65001), ("c", 65002), ("p", 65003))))
    return Broker(
        users=users,
        reaper=procs.Reaper(),
        roots=("/nonexistent-root",),
        interpreters={"python": sys.executable},
        fence_ok=False,
        fence_detail=detail,
        grants=policy.Grants("declaration"),
        environ={},
        parse_user=procs.Account("x", 65004, 65004),
    )
