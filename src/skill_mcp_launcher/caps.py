"""Capabilities, securebits and process attributes, through ``python-prctl``.

The launcher is PID 1 and root. It needs five capabilities at boot (``NET_ADMIN`` to load
the ruleset, ``SETUID``/``SETGID`` to become the other users, ``KILL`` to signal a script's
process group, ``SETPCAP`` to empty the bounding set and lock the securebits) and keeps only
``SETUID``/``SETGID``/``KILL`` once the ruleset is in force - in its effective and permitted
sets only: the bounding set is emptied, because nothing the launcher starts afterwards may ever
hold a capability. Every change is read back from the kernel (``/proc/self/status`` for the
sets, ``PR_GET_SECUREBITS`` for the bits): a drop that silently did nothing is a failed boot,
never a warning.

``python-prctl`` (the user's named library; libcap underneath) makes the calls. It has no
ambient-set call, and needs none: the kernel keeps ambient a subset of permitted and
inheritable, so emptying inheritable empties ambient too, which ``set_caps`` verifies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import prctl

from skill_mcp import proctools

CAP_KILL = prctl.CAP_KILL
CAP_SETGID = prctl.CAP_SETGID
CAP_SETUID = prctl.CAP_SETUID
CAP_SETPCAP = prctl.CAP_SETPCAP
CAP_NET_ADMIN = prctl.CAP_NET_ADMIN
NAMES = {
    CAP_KILL: "KILL",
    CAP_SETGID: "SETGID",
    CAP_SETUID: "SETUID",
    CAP_SETPCAP: "SETPCAP",
    CAP_NET_ADMIN: "NET_ADMIN",
}
_FLAGS = (prctl.CAP_EFFECTIVE, prctl.CAP_PERMITTED, prctl.CAP_INHERITABLE)
# NOROOT: no execve by uid 0 is ever granted capabilities again (the ruleset is loaded before
# this is set: ``nft`` is the one program the launcher runs as root). KEEP_CAPS stays off and
# NO_SETUID_FIXUP stays off, both locked: a uid change away from 0 always empties the sets, which
# is what every privilege drop here relies on.
SECUREBITS = (
    prctl.SECBIT_NOROOT
    | prctl.SECBIT_NOROOT_LOCKED
    | prctl.SECBIT_KEEP_CAPS_LOCKED
    | prctl.SECBIT_NO_SETUID_FIXUP_LOCKED
)


class CapError(RuntimeError):
    """A capability or prctl change failed or did not take effect."""


@dataclass(frozen=True, slots=True)
class CapState:
    effective: int
    permitted: int
    inheritable: int
    bounding: int
    ambient: int
    no_new_privs: bool

    def has(self, cap: int) -> bool:
        return bool(self.effective >> cap & 1)


def mask(caps: Iterable[int]) -> int:
    out = 0
    for cap in caps:
        out |= 1 << cap
    return out


def read_state(pid: int | str = "self") -> CapState:
    """Parse ``/proc/<pid>/status``; the kernel's view, not what we asked for."""
    fields: dict[str, str] = {}
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return CapState(
        effective=int(fields["CapEff"], 16),
        permitted=int(fields["CapPrm"], 16),
        inheritable=int(fields["CapInh"], 16),
        bounding=int(fields["CapBnd"], 16),
        ambient=int(fields.get("CapAmb", "0"), 16),
        no_new_privs=fields.get("NoNewPrivs", "0") == "1",
    )


def set_caps(keep: Iterable[int]) -> CapState:
    """Set effective = permitted = ``keep`` (inheritable and ambient empty) and verify it.

    ``keep`` must be a subset of what the process already has: capabilities can only be
    dropped. Raises ``CapError`` when the kernel refuses or its view afterwards differs.
    """
    kept = set(keep)
    want = mask(kept)
    drop = [cap for cap in prctl.ALL_CAPS if cap not in kept]
    try:
        # One capset: every flag at once, so effective never exceeds permitted in between.
        prctl.set_caps((sorted(kept), _FLAGS[:2], True), (drop, _FLAGS, False), (sorted(kept), _FLAGS[2], False))
    except OSError as exc:
        raise CapError(f"capset failed: {exc.strerror}") from None
    state = read_state()
    if state.effective != want or state.permitted != want or state.inheritable or state.ambient:
        raise CapError(
            f"capability drop did not take effect: wanted {want:#x}, kernel shows "
            f"eff={state.effective:#x} prm={state.permitted:#x} inh={state.inheritable:#x} amb={state.ambient:#x}"
        )
    return state


def drop_bounding() -> CapState:
    """Empty the bounding set (needs ``SETPCAP`` effective) and verify ``CapBnd`` is 0.

    The bounding set limits what an ``execve`` can grant; it does not touch the caller's own
    permitted set, so the launcher keeps using ``SETUID``/``SETGID``/``KILL`` after this. Every
    process it starts afterwards - server, proxy, scripts - inherits an empty bounding set.
    Call it after the ruleset is loaded (``nft`` is exec'd as root and needs ``NET_ADMIN``).
    A capability newer than the library's build cannot be named to it; the read-back catches
    that case as a bounding set that is not empty.
    """
    for cap in prctl.ALL_CAPS:
        try:
            if prctl.capbset_read(cap):
                prctl.capbset_drop(cap)
        except OSError as exc:
            raise CapError(f"dropping {NAMES.get(cap, cap)} from the bounding set: {exc.strerror}") from None
    state = read_state()
    if state.bounding:
        raise CapError(f"bounding set drop did not take effect: kernel shows CapBnd={state.bounding:#x}")
    return state


def lock_securebits() -> int:
    """Set and lock ``SECUREBITS`` (needs ``SETPCAP``); inherited by every later child. Verified."""
    try:
        prctl.set_securebits(SECUREBITS)
    except OSError as exc:
        raise CapError(f"setting the securebits failed: {exc.strerror}") from None
    bits = int(prctl.get_securebits())
    if bits != SECUREBITS:
        raise CapError(f"securebits did not take effect: wanted {SECUREBITS:#x}, kernel shows {bits:#x}")
    return bits


def set_no_new_privs() -> None:
    prctl.set_no_new_privs(1)
    if not read_state().no_new_privs:
        raise CapError("no_new_privs did not take effect")


def set_child_subreaper() -> None:
    """Orphans come to us even when we are not PID 1 (for example under ``docker --init``)."""
    prctl.set_child_subreaper(1)


def set_nondumpable() -> None:
    """``proctools.set_nondumpable`` (the server's rule too), raising ``CapError`` when it fails."""
    problem = proctools.set_nondumpable()
    if problem is not None:
        raise CapError(problem)


def describe(bits: int) -> list[str]:
    return [NAMES.get(i, str(i)) for i in range(64) if bits >> i & 1]
