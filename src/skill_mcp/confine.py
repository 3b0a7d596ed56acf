"""Apply one run's sandbox (``sandbox_rules.Sandbox``) to this process: Landlock, then seccomp.

Called by the process that execs a script, after no-new-privileges and just before ``execve``:
the standalone exec shim (``runner/_exec_shim.py``, which gets the rules' ``wire()`` form over
its configuration pipe) and the appliance broker's forked child (``skill_mcp_launcher.sandbox``).
It reads only the plain values of the wire form, so the shim imports no dataclass for it.

``probe`` says, without changing anything, whether this kernel can confine a run at all;
``apply`` raises ``SandboxUnavailable`` when it cannot, and any other failure as it comes:
never a half-applied sandbox followed by an ``execve``.
"""

from __future__ import annotations

import ctypes
import errno

from skill_mcp import landlock, seccomp

# typing and collections.abc are not imported at run time: the exec shim imports this module
# and pays for every import on a cold start (the shim's own note says what they cost).
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from collections.abc import Mapping
    from typing import Any

    from skill_mcp.sandbox_rules import Sandbox

_PR_GET_SECCOMP = 21
_LEVELS = {
    "read-exec": landlock.FS_READ,
    "read": landlock.FS_READ_FILE | landlock.FS_READ_DIR,
    "read-file": landlock.FS_READ_FILE,
    "read-write-file": landlock.FS_READ_FILE | landlock.FS_WRITE_FILE | landlock.FS_TRUNCATE,
    "all": landlock.FS_ALL,
}


class SandboxUnavailable(Exception):
    """This kernel (or its seccomp filter, or a missing libseccomp) cannot confine a run."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def probe(min_abi: int) -> int:
    """The Landlock ABI when both halves are usable here; ``SandboxUnavailable`` otherwise."""
    try:
        abi = landlock.abi_version()
    except landlock.LandlockError as exc:
        raise SandboxUnavailable(
            f"the kernel offers no Landlock ({errno.errorcode.get(exc.errno or 0, exc.errno)}: "
            f"not built in, disabled at boot, or filtered)"
        ) from None
    if abi < min_abi:
        raise SandboxUnavailable(f"the kernel's Landlock ABI is {abi}; runs need at least {min_abi}")
    try:
        level = seccomp.api_level()
    except seccomp.SeccompError as exc:
        raise SandboxUnavailable(str(exc)) from None
    libc = ctypes.CDLL(None, use_errno=True)
    if level < 1 or libc.prctl(_PR_GET_SECCOMP, 0, 0, 0, 0) < 0:
        raise SandboxUnavailable("the kernel offers no seccomp filter mode")
    return abi


def _rules(rules: Sandbox | Mapping[str, Any]) -> Mapping[str, Any]:
    return rules if isinstance(rules, dict) else rules.wire()  # type: ignore[union-attr]


def build_filter(rules: Sandbox | Mapping[str, Any]) -> seccomp.Filter:
    """The seccomp half, not yet loaded (``pfc()`` shows it)."""
    wire = _rules(rules)
    deny, enosys = seccomp.act_errno(errno.EPERM), seccomp.act_errno(errno.ENOSYS)
    flt = seccomp.Filter(seccomp.ACT_ALLOW)
    try:
        for name in wire["denied"]:
            flt.add(deny, name)
        for name in wire["enosys"]:
            flt.add(enosys, name)
        for flag in wire["clone_flags"]:
            flt.add(deny, "clone", [(0, seccomp.CMP_MASKED_EQ, flag, flag)])
        # socketpair: AF_UNIX only (a connected pair: it reaches no socket of anyone else).
        flt.add(deny, "socketpair", [(0, seccomp.CMP_LT, 1, 0)])
        flt.add(deny, "socketpair", [(0, seccomp.CMP_GT, 1, 0)])
        if wire["inet"]:
            # socket: AF_INET (2) and AF_INET6 (10) only. One comparison a rule, rules either-or.
            flt.add(deny, "socket", [(0, seccomp.CMP_LT, 2, 0)])
            flt.add(deny, "socket", [(0, seccomp.CMP_GT, 10, 0)])
            for family in range(3, 10):
                flt.add(deny, "socket", [(0, seccomp.CMP_EQ, family, 0)])
        else:
            flt.add(deny, "socket")
    except BaseException:
        flt.release()
        raise
    return flt


def build_ruleset(rules: Sandbox | Mapping[str, Any], abi: int) -> landlock.Ruleset:
    """The Landlock half, not yet enforced."""
    wire = _rules(rules)
    ports = wire["tcp_connect"]
    ruleset = landlock.Ruleset(abi, handle_net=ports is not None, scope=True)
    try:
        for path, level, required in wire["paths"]:
            try:
                ruleset.allow_path(path, _LEVELS[level])
            except FileNotFoundError:
                if required:
                    raise
        if ports:
            ruleset.allow_ports(ports, landlock.NET_CONNECT_TCP)
    except BaseException:
        ruleset.close()
        raise
    return ruleset


def apply(rules: Sandbox | Mapping[str, Any]) -> int:
    """Confine this process for good (its children and what it execs inherit it); the ABI used.

    Needs no-new-privileges (or CAP_SYS_ADMIN) already set. The filter is built before the
    ruleset is enforced, so libseccomp is loaded while its file may still be read.
    """
    wire = _rules(rules)
    abi = probe(int(wire["min_abi"]))
    flt = build_filter(wire)
    try:
        build_ruleset(wire, abi).restrict_self()
        flt.load()
    finally:
        flt.release()
    return abi
