"""From observations to one verdict per property: ``held``, ``FAILED`` or ``not applicable``.

Pure functions over the dictionary the agent collects (``agent.collect``), so every verdict,
and every failure message, is tested from tables without a container. A failure message says
what was seen and names the flag or setting that usually causes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HELD = "held"
FAILED = "FAILED"
NA = "not applicable"
DOCUMENTED_CAPS = {"SETUID": 7, "SETGID": 6, "KILL": 5, "NET_ADMIN": 12, "SETPCAP": 8}
CAP_NAMES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
)
DENIED = {"EACCES", "EPERM", "EROFS"}


@dataclass(frozen=True, slots=True)
class Verdict:
    id: str
    title: str
    state: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title, "state": self.state, "detail": self.detail}


class _Skip(Exception):
    """A probe this property needs did not run: the property is not applicable, or failed."""

    def __init__(self, state: str, detail: str) -> None:
        super().__init__(detail)
        self.state, self.detail = state, detail


def cap_names(bits: int) -> list[str]:
    return [CAP_NAMES[i] if i < len(CAP_NAMES) else f"CAP_{i}" for i in range(64) if bits >> i & 1]


def _run(obs: dict[str, Any], mode: str) -> dict[str, Any]:
    """The parsed output of one probe run, or ``_Skip`` saying why there is none."""
    fence = obs.get("fence_unavailable")
    if fence:
        raise _Skip(NA, f"no script runs in this deployment (fence unavailable: {fence})")
    sandbox = obs.get("sandbox_unavailable")
    if sandbox:
        raise _Skip(NA, f"no script runs in this deployment (sandbox unavailable: {sandbox})")
    run = obs.get("runs", {}).get(mode)
    if run is None:
        raise _Skip(FAILED, f"the {mode} probe did not run (the self-test stopped early: {obs.get('stopped', '?')})")
    if run.get("isError"):
        raise _Skip(FAILED, f"the {mode} probe run was refused: {run.get('reason')}: {run.get('detail')}")
    out = run.get("out")
    if not isinstance(out, dict):
        raise _Skip(
            FAILED,
            f"the {mode} probe printed no report (status {run.get('status')}, "
            f"stderr {str(run.get('stderr', ''))[-200:]!r})",
        )
    return out


def uids(obs: dict[str, Any]) -> tuple[str, str]:
    script = _run(obs, "posture")
    server = obs["server"]["uid"]
    ids = {"script": (script["uid"], script["euid"]), "server": (server, server)}
    if 0 in ids["script"] or server == 0:
        return FAILED, (
            f"a uid is root (script {script['uid']}, server {server}): the launcher must start as root "
            "and drop to its own users; do not override the image's entrypoint or users, see deploy.md"
        )
    if script["uid"] == server:
        return FAILED, f"the script and the server share uid {server}: a script could read and signal the server"
    return HELD, f"script uid {script['uid']}, server uid {server}"


def _caps_problems(who: str, caps: dict[str, str]) -> tuple[list[str], int]:
    """What ``who`` holds that it must not, and its bounding set."""
    held = 0
    for key in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
        held |= int(caps.get(key) or "0", 16)
    problems = [f"the {who} holds capabilities {' '.join(cap_names(held))}"] if held else []
    return problems, int(caps.get("CapBnd") or "0", 16)


def capabilities(obs: dict[str, Any]) -> tuple[str, str]:
    script = _run(obs, "posture")
    problems, script_bnd = _caps_problems("script", script["caps"])
    server_problems, server_bnd = _caps_problems("server", obs["server"]["status"])
    problems += server_problems
    if script_bnd or server_bnd or script.get("bounding_prctl"):
        where = [
            f"{who} ({' '.join(cap_names(bits))})"
            for who, bits in (("script", script_bnd), ("server", server_bnd))
            if bits
        ]
        problems.append(
            f"CapBnd not empty in the {' and the '.join(where) or 'script'} - add SETPCAP to the "
            "container's capabilities (--cap-add SETPCAP; Kubernetes capabilities.add), see deploy.md"
        )
    if script.get("setuid_root") == "ok":
        problems.append("the script could setuid(0)")
    if problems:
        return FAILED, "; ".join(problems)
    return HELD, f"script and server: no capabilities, CapBnd 0; setuid(0) refused ({script.get('setuid_root')})"


def no_new_privileges(obs: dict[str, Any]) -> tuple[str, str]:
    script = _run(obs, "posture")
    server = obs["server"]["status"].get("NoNewPrivs")
    if script.get("no_new_privs") != 1 or server != "1":
        return FAILED, (
            f"no-new-privileges is off (script {script.get('no_new_privs')}, server {server}): the launcher "
            "sets it for everything it starts; run the image's own entrypoint, see deploy.md"
        )
    return HELD, "set in the script and in the server"


def container_grant(obs: dict[str, Any]) -> tuple[str, str]:
    entry = obs["facts"]["entry"]
    allowed = sum(1 << bit for bit in DOCUMENTED_CAPS.values())
    extra = (entry["effective"] | entry["permitted"] | entry["bounding"] | entry["ambient"]) & ~allowed
    problems = []
    if extra:
        names = " ".join(cap_names(extra))
        problems.append(
            f"the container was granted {names} beyond the documented SETUID SETGID KILL NET_ADMIN "
            "SETPCAP: a process entering by docker exec or kubectl exec holds them - start from "
            "--cap-drop ALL (capabilities.drop: [ALL]) and add only those five, see deploy.md"
        )
    if not entry["no_new_privs"]:
        problems.append(
            "the container was started without no-new-privileges: a process entering by docker exec or "
            "kubectl exec may gain privileges - add --security-opt no-new-privileges (Kubernetes: "
            "allowPrivilegeEscalation: false), see deploy.md"
        )
    if problems:
        return FAILED, "; ".join(problems)
    return HELD, f"granted {' '.join(cap_names(entry['effective'])) or 'nothing'}, with no-new-privileges"


def nproc(obs: dict[str, Any]) -> tuple[str, str]:
    out = _run(obs, "nproc")
    if out.get("refused") == "EAGAIN" and out["forked"] < out["bound"]:
        return HELD, f"fork refused (EAGAIN) after {out['forked']} processes (RLIMIT_NPROC {out['rlimit'][0]})"
    return FAILED, (
        f"the script forked {out['forked']} processes (bound {out['bound']}, refusal {out.get('refused')}): "
        "RLIMIT_NPROC is not in force for the script uid (root and CAP_SYS_RESOURCE ignore it), "
        "see deploy.md"
    )


def server_hardening(obs: dict[str, Any]) -> tuple[str, str]:
    server = obs["server"]
    sibling = server["sibling"]
    problems = []
    if server["dumpable"] != 0 or sibling.get("environ") not in DENIED or sibling.get("mem") not in DENIED:
        problems.append(
            f"the server is dumpable (PR_GET_DUMPABLE {server['dumpable']}; a same-uid process opened "
            f"environ: {sibling.get('environ')}, mem: {sibling.get('mem')})"
        )
    if server.get("environ_bytes") is None:
        problems.append(f"the server's environment block could not be read ({server.get('scan_error')})")
    elif server["environ_bytes"]:
        problems.append(f"the server's exec-time environment block still holds {server['environ_bytes']} bytes")
    if problems:
        return FAILED, "; ".join(problems) + ": the server hardens itself at boot; run the image's own command"
    return HELD, (
        f"non-dumpable (a same-uid process was refused: environ {sibling['environ']}, mem {sibling['mem']}); "
        "environment block empty"
    )


def secret_separation(obs: dict[str, Any]) -> tuple[str, str]:
    found = obs["server"]["canary_found_in"]
    if obs["server"].get("scan_error"):
        return FAILED, f"the server's memory could not be scanned: {obs['server']['scan_error']}"
    if found:
        return FAILED, (
            f"the owner's secret reached the server process (found in its {', '.join(found)}): the "
            "launcher must keep granted values and hand them only to the script; use an image whose "
            "broker holds secrets, see deploy.md"
        )
    try:
        script = _run(obs, "posture")
    except _Skip as skip:
        return HELD, f"not in the server's environment, memory, logs or answers ({skip.detail}: no control run)"
    if script.get("secret_sha256") != obs["facts"]["canary_sha256"]:
        return FAILED, (
            "the granted script did not receive the canary secret, so its absence from the server "
            "proves nothing; the grant in MCP_SKILL_RUN was not honoured"
        )
    return HELD, "not in the server's environment, memory, logs or answers; the granted script received it"


def skills_read_only(obs: dict[str, Any]) -> tuple[str, str]:
    script = _run(obs, "posture")
    wrote = {f"script: {d}": r for d, r in script["skills_write"].items()}
    wrote.update({f"server: {d}": r for d, r in obs["server"]["writes"].items()})
    bad = [d for d, r in wrote.items() if r not in DENIED]
    if bad:
        return FAILED, (
            f"a file could be created in {', '.join(bad)}: mount the skills read-only and root-owned "
            "(-v ...:/skills:ro; Kubernetes readOnly: true), see deploy.md"
        )
    return HELD, "every attempt refused (" + ", ".join(sorted(set(wrote.values()))) + f") in {len(wrote)} places"


def runs_isolated(obs: dict[str, Any]) -> tuple[str, str]:
    planted = _run(obs, "plant")
    if planted["wrote"].get(f"{planted['scratch']}/selftest-planted-{obs['token']}") != "ok":
        return FAILED, "the first run could not write its own scratch directory, so nothing was proven"
    try:
        found = _run(obs, "find")
    except _Skip as skip:
        return FAILED, (
            f"a run could not start after another had run: {skip.detail} - a run must not be able to "
            "stop later runs, see deploy.md"
        )
    seen = [p for p, there in found["seen"].items() if there]
    if found.get("shm_seen"):
        seen.append(f"System V shm key {planted['shm_key']:#x}")
    if seen:
        return FAILED, (
            f"the next run saw what the previous one left: {', '.join(seen)} - keep /run and /tmp as "
            "tmpfs mounts (--tmpfs /run --tmpfs /tmp) and use an image whose broker cleans between runs, "
            "see deploy.md"
        )
    made = sum(1 for r in planted["wrote"].values() if r == "ok")
    return HELD, f"the first run left {made} files and a shm segment; the next run saw none of them"


def cleanup_complete(obs: dict[str, Any]) -> tuple[str, str]:
    littered = _run(obs, "litter")
    scratch = littered.get("scratch", "")
    if littered.get("deep", {}).get(scratch) != "ok" or not littered.get("files"):
        return FAILED, "the littering run could not make its tree and files in its own directory, so nothing was proven"
    try:
        found = _run(obs, "after")
    except _Skip as skip:
        return FAILED, (
            f"no run was admitted after a run left a {littered['levels']}-level tree and "
            f"{littered['files']} files: {skip.detail} - the clean-up did not finish, see deploy.md"
        )
    seen = []
    if found.get("earlier_scratch"):
        seen.append(f"the earlier run's directory {scratch}")
    if found.get("tmp_tree"):
        seen.append("its tree in /tmp")
    if found.get("own_entries"):
        seen.append(f"{found['own_entries']} entries in a fresh run directory")
    if found.get("others"):
        seen.append(f"processes of the script uid {found['others'][:5]}")
    if seen:
        return FAILED, (
            f"the next run saw what a run with a {littered['levels']}-level tree and {littered['files']} "
            f"files left: {', '.join(seen)} - use an image whose clean-up is depth-proof and waits, "
            "see deploy.md"
        )
    waited = obs.get("cleanup_refused", 0)
    return HELD, (
        f"a run left a {littered['levels']}-level tree and {littered['files']} files; the next run "
        + (f"was refused {waited} times (cleanup-pending), then " if waited else "")
        + "saw none of it and no process of the script uid"
    )


def egress_default_deny(obs: dict[str, Any]) -> tuple[str, str]:
    if obs.get("fence_unavailable"):
        return FAILED, (
            f"fence unavailable: {obs['fence_unavailable']} - add --cap-add NET_ADMIN (Kubernetes: "
            "capabilities.add NET_ADMIN); without it no script runs, see deploy.md"
        )
    out = _run(obs, "egress")
    problems = []
    port = obs["listener_port"]
    if out["loopback"]["result"] == "connected" or obs.get("listener_hits"):
        problems.append(f"a direct connection from the script to 127.0.0.1:{port} succeeded")
    if "direct_peer" in out and out["direct_peer"]["result"] == "connected":
        problems.append(f"a direct connection to {obs['facts']['probe_address']}:80 succeeded")
    answered = [s for s, r in out["dns"].items() if r == "answered"]
    if answered:
        problems.append(f"a DNS query from the script was answered by {', '.join(answered)}")
    refused = out["proxy_undeclared"]
    if refused.get("status") != 403:
        problems.append(f"the proxy did not refuse an undeclared host with 403 ({refused})")
    if problems:
        return FAILED, (
            "; ".join(problems) + ": the nftables ruleset is not in force; anything holding NET_ADMIN "
            "(docker exec, kubectl exec) can change it after boot, see deploy.md"
        )
    return HELD, (
        f"direct connection {out['loopback']['result']}, DNS "
        f"{', '.join(sorted(set(out['dns'].values()))) or 'no resolver configured'}, "
        "undeclared host refused by the proxy (403)"
    )


def egress_allowed_host(obs: dict[str, Any]) -> tuple[str, str]:
    host = obs["facts"]["probe_host"]
    if not host:
        return NA, "no --egress-probe-host NAME given: the positive egress control needs a host you name"
    if obs.get("fence_unavailable"):
        return FAILED, f"fence unavailable: {obs['fence_unavailable']}"
    out = _run(obs, "egress")
    got = out.get("proxy_declared", {})
    direct = out.get("direct_peer", {}).get("result", "not tried: the launcher could not resolve the name")
    if got.get("result") == "http" and "tinyproxy" not in str(got.get("server", "")).lower():
        return HELD, (
            f"http://{host}/ answered {got['status']} through the proxy (declared and granted); "
            f"a direct connection to it: {direct}"
        )
    return FAILED, (
        f"http://{host}/ was not reached through the proxy ({got}): is {host} reachable from the "
        "container's network and its DNS? see deploy.md"
    )


def ruleset_locked(obs: dict[str, Any]) -> tuple[str, str]:
    script = _run(obs, "posture")
    attempts = {
        "script flush": script["nft_flush"],
        "script add": script["nft_add"],
        "server flush": obs["server"]["nft"],
    }
    changed = [who for who, r in attempts.items() if r.get("rc") == 0]
    if changed:
        return FAILED, (
            f"the ruleset was changed by: {', '.join(changed)} - NET_ADMIN reached an unprivileged uid; "
            "run the image's own entrypoint with the documented capabilities, see deploy.md"
        )
    return HELD, "nft refused to the script uid and to the server uid"


def no_leftover_processes(obs: dict[str, Any]) -> tuple[str, str]:
    planted = _run(obs, "plant")
    left = obs["leftovers"]
    if not obs.get("root_processes_seen"):
        return FAILED, (
            "the server's uid could not see the launcher's processes in /proc (hidepid?), so a "
            "leftover could not have been seen either"
        )
    if left:
        return FAILED, (
            f"{len(left)} processes of the script uid outlived their run ({left[:5]}): the launcher must "
            "be PID 1 with KILL (no docker --init, no shareProcessNamespace), see deploy.md"
        )
    return HELD, f"none after a run that left a detached grandchild (pid {planted['sleeper']})"


def _confined(obs: dict[str, Any]) -> dict[str, Any]:
    """The confine probe's report; a kernel that cannot confine FAILS every sandbox property by name."""
    if obs.get("sandbox_unavailable"):
        raise _Skip(
            FAILED,
            f"sandbox-unavailable: {obs['sandbox_unavailable']} - the kernel offers no Landlock "
            f"(ABI 3 or later) or no seccomp, or the container's seccomp profile refuses them; "
            "no script runs, see fence.md",
        )
    return _run(obs, "confine")


def sandbox_files(obs: dict[str, Any]) -> tuple[str, str]:
    out = _confined(obs)
    leaked = [p for p, r in {**out["reads"], **out["writes"]}.items() if r not in DENIED]
    if leaked:
        return FAILED, f"the script reached {', '.join(leaked)}: the run's Landlock rules are not in force"
    if out["own_read"] != "ok" or out["own_write"] != "ok":
        return FAILED, (
            f"the script could not read its own bundle ({out['own_read']}) or write its run directory "
            f"({out['own_write']}), so the denials prove nothing"
        )
    return HELD, (
        f"{len(out['reads'])} reads (other skills, the run directories' root) and writes to "
        f"{', '.join(out['writes'])} refused; its own bundle and TMPDIR work"
    )


def sandbox_network(obs: dict[str, Any]) -> tuple[str, str]:
    out = _confined(obs)
    other, proxy = out["connect_other"]["result"], out["connect_proxy"]["result"]
    if other == "connected" or obs.get("confine_hits"):
        return FAILED, "the script connected to a loopback port other than the proxy's"
    if proxy != "connected":
        return FAILED, f"the script could not reach the egress proxy's port ({proxy}), so the denial proves nothing"
    return HELD, f"TCP to another loopback port refused ({other}); the proxy's port reached"


def sandbox_ipc(obs: dict[str, Any]) -> tuple[str, str]:
    out = _confined(obs)["ipc"]
    made = [name for name, r in out.items() if r not in DENIED]
    if made:
        return FAILED, f"the script made {', '.join(made)}: the run's seccomp filter is not in force"
    return HELD, f"{', '.join(out)} refused ({', '.join(sorted(set(out.values())))})"


def sandbox_scopes(obs: dict[str, Any]) -> tuple[str, str]:
    out = _confined(obs)
    if out["abstract"] == "connected" or out["signal_server"] == "ok":
        return FAILED, (
            f"the script reached outside its run (abstract socket: {out['abstract']}, signal to the "
            f"server: {out['signal_server']})"
        )
    return (
        HELD,
        f"an abstract unix socket outside the run ({out['abstract']}) and a signal to the server "
        f"({out['signal_server']}) refused",
    )


CHECKS: tuple[tuple[str, str, Callable[[dict[str, Any]], tuple[str, str]]], ...] = (
    ("uids", "script and server run as distinct non-root uids", uids),
    ("capabilities", "no capabilities and an empty bounding set (script, server)", capabilities),
    ("no-new-privileges", "no-new-privileges in the script and the server", no_new_privileges),
    ("container-grant", "the runtime grants only the documented capabilities, with no-new-privileges", container_grant),
    ("nproc", "RLIMIT_NPROC in force (a bounded fork test)", nproc),
    ("server-hardening", "the server is non-dumpable and its environment block is empty", server_hardening),
    ("secret-separation", "the owner's secret never enters the server", secret_separation),
    ("skills-read-only", "no write to the skills", skills_read_only),
    ("runs-isolated", "no file surviving into the next run", runs_isolated),
    ("cleanup-complete", "a deep tree and many files left by one run, none seen by the next", cleanup_complete),
    ("egress-default-deny", "default-deny egress (direct connection, DNS, undeclared host)", egress_default_deny),
    ("egress-allowed-host", "a declared and granted host is reachable through the proxy", egress_allowed_host),
    ("ruleset-locked", "the ruleset cannot be changed by the script and server uids", ruleset_locked),
    ("no-leftover-processes", "no process of the script uid left after a run", no_leftover_processes),
    ("sandbox-files", "a run reads only the runtime and its skill, and writes only its run directory", sandbox_files),
    ("sandbox-network", "a run connects to the egress proxy's port only", sandbox_network),
    ("sandbox-ipc", "a run makes no System V or POSIX IPC and no io_uring", sandbox_ipc),
    ("sandbox-scopes", "a run reaches no abstract socket and signals no process outside it", sandbox_scopes),
)


def judge(obs: dict[str, Any]) -> list[Verdict]:
    not_claimed = set(obs["facts"].get("not_claimed", ()))
    out = []
    for pid, title, check in CHECKS:
        if pid in not_claimed:
            out.append(Verdict(pid, title, NA, "not claimed by this deployment (--not-claimed)"))
            continue
        try:
            state, detail = check(obs)
        except _Skip as skip:
            state, detail = skip.state, skip.detail
        except (KeyError, TypeError, ValueError) as exc:
            state, detail = FAILED, f"the observations were incomplete ({type(exc).__name__}: {exc})"
        out.append(Verdict(pid, title, state, detail))
    return out


def exit_code(verdicts: list[Verdict]) -> int:
    return 1 if any(v.state == FAILED for v in verdicts) else 0


def render(verdicts: list[Verdict]) -> str:
    width = max(len(v.id) for v in verdicts)
    lines = []
    for v in verdicts:
        state = v.state if v.state != NA else f"not applicable ({v.detail})"
        tail = "" if v.state == NA else f" - {v.detail}"
        lines.append(f"{v.id:<{width}}  {state}{tail}")
    failed = sum(v.state == FAILED for v in verdicts)
    lines.append(
        f"selftest: {len(verdicts) - failed} of {len(verdicts)} properties held or not applicable, {failed} FAILED"
    )
    return "\n".join(lines) + "\n"
