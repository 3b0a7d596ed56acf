"""Boot-time hardening of the server process against same-uid readers.

A script runs as the server's uid in standalone mode. On Linux such a process can read
``/proc/<server pid>/environ`` (the exec-time environment block, which holds every credential
the server was started with) and, while the server is dumpable, ``/proc/<server pid>/mem``.

``harden_process`` does two things, once, at boot:

1. zeroes the exec-time environment block, the region ``/proc/self/stat`` reports as
   ``env_start..env_end``, with ``ctypes.memset``. ``os.environ`` is a copy Python made at
   startup and keeps every value. libc's ``environ`` array pointed into that block, so it is
   rebuilt (``clearenv`` then ``setenv`` from ``os.environ``) in heap memory, where
   ``/proc/<pid>/environ`` never looks; a child started without an explicit ``env`` still
   inherits a correct environment.
2. sets ``PR_SET_DUMPABLE`` to 0 (``proctools.set_nondumpable``, the launcher's too), so a same-uid process can neither
   open ``/proc/<pid>/environ`` or ``/proc/<pid>/mem`` nor ptrace the server (the files become
   root-owned). The wipe itself stays on ctypes: ``memset``, ``clearenv`` and ``setenv`` are
   libc's, and no library wraps them.

Neither protects against root (a root reader passes every /proc check) or against the values
still living in this process's heap for anyone who can get past non-dumpable.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from skill_mcp.proctools import set_nondumpable


@dataclass(frozen=True, slots=True)
class HardenReport:
    scrubbed: bool
    nondumpable: bool
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.scrubbed and self.nondumpable


def env_block(stat_text: str) -> tuple[int, int]:
    """``(env_start, env_end)`` from the text of ``/proc/<pid>/stat`` (fields 50 and 51)."""
    # The command name (field 2) may hold spaces and parentheses; fields restart after the last ')'.
    rest = stat_text[stat_text.rindex(")") + 2 :].split()
    return int(rest[50 - 3]), int(rest[51 - 3])


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def scrub_environ_block() -> str | None:
    """Zero the exec-time environment block and rebuild libc's environ; return a problem or None."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            start, end = env_block(fh.read())
    except (OSError, ValueError, IndexError) as exc:
        return f"cannot locate the environment block: {exc}"
    if not 0 < start < end:
        return f"the kernel reports no environment block ({start}..{end})"
    libc = _libc()
    saved = dict(os.environb)
    # Rebuild libc's view first: after clearenv nothing points into the block we zero next.
    if libc.clearenv() != 0:
        return "clearenv() failed"
    for key, value in saved.items():
        libc.setenv(key, value, 1)
    ctypes.memset(start, 0, end - start)
    with open("/proc/self/environ", "rb") as fh:
        left = fh.read(end - start + 1)
    if left.strip(b"\x00"):
        return "the environment block still holds data after the wipe"
    return None


def unscrubbed_warning(report: HardenReport) -> dict[str, str] | None:
    """The audit record a standalone server writes at boot when the wipe failed; None when it worked."""
    if report.scrubbed:
        return None
    return {
        "event": "warning",
        "reason": "environ-unscrubbed",
        "detail": "the exec-time environment block could not be wiped; a same-uid script may read "
        f"this server's environment: {report.detail}",
    }


_EARLY: list[HardenReport] = []


def harden_early() -> None:
    """Harden now, before a thread is started; the next ``take_early`` returns this report."""
    _EARLY.append(harden_process())


def take_early() -> HardenReport | None:
    """The report of an earlier ``harden_early`` (once); None when the process has not hardened."""
    return _EARLY.pop() if _EARLY else None


def harden_process() -> HardenReport:
    """Wipe the environ block and make the process non-dumpable. Never raises."""
    problems = []
    try:
        scrub = scrub_environ_block()
    except OSError as exc:  # e.g. a sandbox that refuses /proc/self reads
        scrub = f"the wipe failed: {exc}"
    dump = set_nondumpable()
    problems = [p for p in (scrub, dump) if p]
    return HardenReport(scrubbed=scrub is None, nondumpable=dump is None, detail="; ".join(problems))
