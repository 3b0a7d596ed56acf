"""Load the nftables ruleset and prove it is in force.

"Loaded" is not taken from ``nft``'s exit status alone: the table is listed back as JSON
and must show the output chain hooked at ``output`` with policy ``drop`` and the rules that
name the three uids. Anything else is a failed fence, and the launcher runs no script.

Which hosts a run may reach is decided in ``egress.allowed_hosts`` (declared and granted) and
enforced by the proxy's allowlist (``proxy.write_config``) and the ruleset itself
(``nftables/skill-mcp.nft``), which lets only the proxy's uid leave the box.
"""

from __future__ import annotations

import subprocess
from typing import Any

from skill_mcp import jsonbound

NFT = "/usr/sbin/nft"
RULESET = "/etc/skill-mcp/skill-mcp.nft"
TABLE = ("inet", "skill_mcp")
EXPECTED_UIDS = {0, 10001, 10002, 10003}  # 0: the runtime DNS forwarder only


class FenceError(RuntimeError):
    pass


def _nft(*args: str, timeout: float = 10.0) -> str:
    try:
        proc = subprocess.run(
            [NFT, *args],
            capture_output=True,
            timeout=timeout,
            check=False,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FenceError(f"nft {' '.join(args)}: {exc}") from None
    if proc.returncode != 0:
        raise FenceError(
            f"nft {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode('utf-8', 'replace').strip()[:500]}"
        )
    return proc.stdout.decode("utf-8", "replace")


def load_and_verify(path: str = RULESET) -> None:
    _nft("-f", path)
    try:
        listing = jsonbound.loads(_nft("-j", "list", "table", *TABLE))
    except ValueError as exc:
        raise FenceError(f"nft -j list table is not JSON: {exc}") from None
    verify(listing)


def verify(listing: dict[str, Any]) -> None:
    """Check a ``nft -j list table`` document shows our drop-policy output chain and rules."""
    items = listing.get("nftables", [])
    chains = [i["chain"] for i in items if "chain" in i]
    rules = [i["rule"] for i in items if "rule" in i]
    out = [c for c in chains if c.get("hook") == "output" and c.get("type") == "filter"]
    if len(out) != 1 or out[0].get("policy") != "drop":
        raise FenceError("the output chain with policy drop is not in force")
    uids = set()
    for rule in rules:
        for expr in rule.get("expr", []):
            match = expr.get("match", {})
            if match.get("left", {}).get("meta", {}).get("key") == "skuid":
                uids.add(match.get("right"))
    if uids != EXPECTED_UIDS:
        raise FenceError(f"the rules name uids {sorted(uids)}, expected {sorted(EXPECTED_UIDS)}")
