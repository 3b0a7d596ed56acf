"""``selftest``: boot exactly as in production, but with the self-test agent as the server.

``docker run <the deployment's flags> IMAGE selftest [--json] [--egress-probe-host NAME]``
reaches the launcher with ``selftest`` where the server command would be. Before the normal
boot (``boot.main`` carries on unchanged: ruleset, capability drop, users, broker), this
module:

* records what the runtime granted the container, read from PID 1's own status before the
  launcher changes anything (capabilities, no-new-privileges): that is what a process
  entering by ``docker exec`` / ``kubectl exec`` gets;
* installs the probe skill (shipped in this package, ``selftest_skill``) under
  ``/run/skill-mcp-selftest``, root-owned, with ``egress`` declaring the operator's probe host
  when one was given; it is never under a skills root a production server serves;
* replaces the skills roots with that one directory, grants the probe script in
  ``MCP_SKILL_RUN`` (a canary secret variable, and the probe host), and sets the canary in the
  launcher's environment exactly as an owner sets a secret;
* returns the server command: ``python -I -m skill_mcp.selftest FACTS``, the agent that runs
  the real server in its own process and drives it over stdio (see ``skill_mcp.selftest``).

The agent never learns the canary's value, only its SHA-256 and prefix, so finding it in the
server's memory means it arrived there. Standard library only, like the rest of the launcher.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import socket
import sys
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass

from skill_mcp import trees
from skill_mcp_launcher import caps, proxy

SKILL = "skill-mcp-selftest"
SCRIPT = "scripts/probe.py"
CANARY_VAR = "SKILL_MCP_SELFTEST_SECRET"
CANARY_PREFIX = "skmcp-selftest-canary-"
INSTALL_ROOT = "/run/skill-mcp-selftest"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "selftest_skill")
PROPERTIES = (
    "uids",
    "capabilities",
    "no-new-privileges",
    "container-grant",
    "nproc",
    "server-hardening",
    "secret-separation",
    "skills-read-only",
    "runs-isolated",
    "cleanup-complete",
    "egress-default-deny",
    "egress-allowed-host",
    "ruleset-locked",
    "no-leftover-processes",
    "sandbox-files",
    "sandbox-network",
    "sandbox-ipc",
    "sandbox-scopes",
)

SKILL_MD = """---
name: {name}
description: The appliance's posture self-test probes. Installed only by `selftest`; never served otherwise.
mcp-host:
  version: 1
  run:
    - script: {script}
      interpreter: python
      timeout: 60
      env: [{var}]
  egress: [{egress}]
---
Runs under `selftest` only: `probe.py MODE ARGS...` prints one JSON object.
"""


class SelftestError(RuntimeError):
    """The self-test cannot start (a bad option, or no writable /run for its probe skill)."""


@dataclass(frozen=True, slots=True)
class Options:
    json: bool
    egress_probe_host: str | None
    wait_for: str | None
    not_claimed: tuple[str, ...]


def parse(argv: Sequence[str]) -> Options:
    parser = argparse.ArgumentParser(prog="selftest", description="Check this deployment's posture from the inside.")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    parser.add_argument(
        "--egress-probe-host",
        metavar="NAME",
        help="a host the probe may reach through the proxy (the positive egress control)",
    )
    parser.add_argument(
        "--wait-for", metavar="PATH", help="after boot, wait (at most 300 s) until PATH exists before probing"
    )
    parser.add_argument(
        "--not-claimed",
        action="append",
        default=[],
        choices=PROPERTIES,
        metavar="PROPERTY",
        help="a property this deployment does not claim: reported as not applicable",
    )
    args = parser.parse_args(list(argv))
    host = args.egress_probe_host
    if host is not None and not proxy.valid_host(host):
        parser.error(f"--egress-probe-host {host!r} is not a plain DNS host name (no IP literal, no wildcard)")
    return Options(
        json=args.json,
        egress_probe_host=host.lower() if host else None,
        wait_for=args.wait_for,
        not_claimed=tuple(args.not_claimed),
    )


def operator_roots(environ: MutableMapping[str, str]) -> list[str]:
    """The skills roots this container was given; the probe checks it cannot write them."""
    roots = []
    for var in ("SKILLS_DIR", "MCP_SKILLS_PATH"):
        for part in environ.get(var, "").split(":"):
            if part.strip() and os.path.isdir(part):
                roots.append(os.path.realpath(part))
    return list(dict.fromkeys(roots))


def resolve(host: str | None) -> str | None:
    """The probe host's address, looked up before the ruleset is loaded (scripts have no DNS)."""
    if host is None:
        return None
    try:
        infos = socket.getaddrinfo(host, 80, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return None
    return str(infos[0][4][0]) if infos else None


def install_skill(egress_host: str | None, root: str = INSTALL_ROOT) -> str:
    """Copy the probe skill under ``root`` (root-owned, read-only to everyone else); return the root."""
    target = os.path.join(root, SKILL)
    try:
        trees.remove_tree(root)
        os.makedirs(os.path.join(target, "scripts"), mode=0o755)
        shutil.copyfile(os.path.join(SOURCE, SCRIPT), os.path.join(target, SCRIPT))
        with open(os.path.join(target, "SKILL.md"), "w", encoding="utf-8") as fh:
            fh.write(SKILL_MD.format(name=SKILL, script=SCRIPT, var=CANARY_VAR, egress=egress_host or ""))
        for path in (root, target, os.path.join(target, "scripts")):
            os.chmod(path, 0o755)  # noqa: S103 - the script uid must traverse and read its own skill
        for path in (os.path.join(target, "SKILL.md"), os.path.join(target, SCRIPT)):
            os.chmod(path, 0o644)
    except OSError as exc:
        raise SelftestError(
            f"cannot install the probe skill under {root}: {exc} "
            "(the appliance needs a writable /run: --tmpfs /run, see deploy.md)"
        ) from None
    return root


def prepare(argv: Sequence[str], environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set the stage for the production boot; return the server command (the agent)."""
    env = os.environ if environ is None else environ
    options = parse(argv)
    entry = caps.read_state()  # before the launcher drops anything: what the runtime granted
    roots = operator_roots(env)
    root = install_skill(options.egress_probe_host)
    canary = CANARY_PREFIX + secrets.token_hex(16)
    grant = {
        "skill": SKILL,
        "script": SCRIPT,
        "env": [CANARY_VAR],
        "egress": [options.egress_probe_host] if options.egress_probe_host else [],
    }
    env.pop("SKILLS_DIR", None)
    env.update(MCP_SKILLS_PATH=root, MCP_SKILL_RUN=json.dumps([grant]), **{CANARY_VAR: canary})
    facts = {
        "json": options.json,
        "not_claimed": list(options.not_claimed),
        "wait_for": options.wait_for,
        "skill": SKILL,
        "script": SCRIPT,
        "operator_roots": roots,
        "probe_host": options.egress_probe_host,
        "probe_address": resolve(options.egress_probe_host),
        "canary_prefix": CANARY_PREFIX,
        "canary_sha256": hashlib.sha256(canary.encode()).hexdigest(),
        "entry": {
            "effective": entry.effective,
            "permitted": entry.permitted,
            "bounding": entry.bounding,
            "ambient": entry.ambient,
            "no_new_privs": entry.no_new_privs,
        },
    }
    return [sys.executable, "-I", "-m", "skill_mcp.selftest", json.dumps(facts)]
