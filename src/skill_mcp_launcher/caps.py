"""Capabilities and process attributes, through the kernel's own interfaces (stdlib only).

The launcher is PID 1 and root. It needs five capabilities at boot (``NET_ADMIN`` to load
the ruleset, ``SETUID``/``SETGID`` to become the other users, ``KILL`` to signal a script's
process group, ``SETPCAP`` to empty the bounding set) and keeps only ``SETUID``/``SETGID``/
``KILL`` once the ruleset is in force - in its effective and permitted sets only: the bounding
set is emptied, because nothing the launcher starts afterwards may ever hold a capability.
Every change is read back from ``/proc/self/status``: a drop that silently did nothing is a
failed boot, never a warning.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterable
from dataclasses import dataclass

CAP_KILL = 5
CAP_SETGID = 6
CAP_SETUID = 7
CAP_SETPCAP = 8
CAP_NET_ADMIN = 12
NAMES = {CAP_KILL: "KILL", CAP_SETGID: "SETGID", CAP_SETUID: "SETUID", CAP_SETPCAP: "SETPCAP",
         CAP_NET_ADMIN: "NET_ADMIN"}

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


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


class _Header(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _Data(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _prctl(libc: ctypes.CDLL, *args: int) -> None:
    if libc.prctl(*(ctypes.c_ulong(a) for a in args), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise CapError(f"prctl{args} failed: {os.strerror(err)}")


def set_caps(keep: Iterable[int]) -> CapState:
    """Set effective = permitted = ``keep`` (inheritable and ambient empty) and verify it.

    ``keep`` must be a subset of what the process already has: capabilities can only be
    dropped. Raises ``CapError`` when the kernel's view afterwards differs from the request.
    """
    want = mask(keep)
    libc = _libc()
    header = _Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    for i in range(2):
        part = (want >> (32 * i)) & 0xFFFFFFFF
        data[i].effective = part
        data[i].permitted = part
        data[i].inheritable = 0
    if libc.capset(ctypes.byref(header), data) != 0:
        raise CapError(f"capset failed: {os.strerror(ctypes.get_errno())}")
    _prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0)
    state = read_state()
    if state.effective != want or state.permitted != want or state.inheritable or state.ambient:
        raise CapError(
            f"capability drop did not take effect: wanted {want:#x}, kernel shows "
            f"eff={state.effective:#x} prm={state.permitted:#x} inh={state.inheritable:#x} amb={state.ambient:#x}"
        )
    return state


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return 63  # every bit the status line can show; dropping an unknown one fails with EINVAL


def drop_bounding() -> CapState:
    """Empty the bounding set (needs ``SETPCAP`` effective) and verify ``CapBnd`` is 0.

    The bounding set limits what an ``execve`` can grant; it does not touch the caller's own
    permitted set, so the launcher keeps using ``SETUID``/``SETGID``/``KILL`` after this. Every
    process it starts afterwards - server, proxy, scripts - inherits an empty bounding set.
    Call it after the ruleset is loaded (``nft`` is exec'd as root and needs ``NET_ADMIN``).
    """
    libc = _libc()
    for cap in range(_cap_last() + 1):
        try:
            _prctl(libc, PR_CAPBSET_DROP, cap, 0, 0)
        except CapError as exc:
            raise CapError(f"dropping {NAMES.get(cap, cap)} from the bounding set: {exc}") from None
    state = read_state()
    if state.bounding:
        raise CapError(f"bounding set drop did not take effect: kernel shows CapBnd={state.bounding:#x}")
    return state


def set_no_new_privs() -> None:
    libc = _libc()
    _prctl(libc, PR_SET_NO_NEW_PRIVS, 1, 0, 0)
    if not read_state().no_new_privs:
        raise CapError("no_new_privs did not take effect")


def set_child_subreaper() -> None:
    """Orphans come to us even when we are not PID 1 (for example under ``docker --init``)."""
    _prctl(_libc(), PR_SET_CHILD_SUBREAPER, 1, 0, 0)


def set_nondumpable() -> None:
    _prctl(_libc(), PR_SET_DUMPABLE, 0, 0, 0)


def describe(bits: int) -> list[str]:
    return [NAMES.get(i, str(i)) for i in range(64) if bits >> i & 1]
