"""A small ctypes binding of libseccomp (``libseccomp.so.2``): a filter as a list of rules.

The C library is the official, maintained part of the seccomp project; its Python binding is
built for one Python (Debian's ``python3-seccomp`` binds Debian's interpreter only) and the
ctypes wrapper on PyPI has had no release since 2021 (docs/fence.md, "The sandbox"). So the
handful of calls used are bound here, with the standard library only: the stdlib-only exec shim
and the launcher import it.

A ``Filter`` starts from a default action, takes ``deny`` rules (a system call, by name,
optionally with argument comparisons: all the comparisons of one rule must hold, and two rules
for one call are either-or), and is loaded with ``load``; ``pfc`` exports it as text for
inspection. A system call unknown to this architecture (``ipc`` on x86_64) is skipped, since a
program cannot make it. Every failure raises ``SeccompError``.

Which system calls a run may not make is not written here: the list is data in
``sandbox_rules.DENIED_SYSCALLS``, turned into a filter by ``confine.build_filter``.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

ACT_ALLOW = 0x7FFF0000
ACT_KILL_PROCESS = 0x80000000
# Comparison operators (enum scmp_compare).
CMP_NE, CMP_LT, CMP_LE, CMP_EQ, CMP_GE, CMP_GT, CMP_MASKED_EQ = 1, 2, 3, 4, 5, 6, 7
_NR_SCMP_ERROR = -1

Comparison = tuple[int, int, int, int]  # (argument index, operator, datum a, datum b)


def act_errno(errno: int) -> int:
    """The action that fails the call with ``errno`` (SCMP_ACT_ERRNO)."""
    return 0x00050000 | (errno & 0xFFFF)


class SeccompError(OSError):
    """libseccomp is missing or refused a step; ``errno`` says why when it gave one."""


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


def library() -> ctypes.CDLL:
    """libseccomp, loaded with its prototypes; ``SeccompError`` when it is not installed."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as exc:
        raise SeccompError(2, f"libseccomp.so.2 is not installed: {exc}") from None  # ENOENT
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_load.argtypes = (ctypes.c_void_p,)
    lib.seccomp_export_pfc.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.seccomp_api_get.restype = ctypes.c_uint
    return lib


def _check(result: int, what: str) -> None:
    if result < 0:
        raise SeccompError(-result, f"{what}: {os.strerror(-result)}")


class Filter:
    """One filter being built; ``load`` applies it to this process (and all it execs) for good."""

    def __init__(self, default: int = ACT_ALLOW, lib: ctypes.CDLL | None = None) -> None:
        self._lib = lib or library()
        ctx = self._lib.seccomp_init(default)
        if not ctx:
            raise SeccompError(22, "seccomp_init failed")  # EINVAL
        self._ctx: int | None = ctx

    def resolve(self, name: str) -> int | None:
        """The call's number on this architecture; ``None`` when it has no such call."""
        nr = int(self._lib.seccomp_syscall_resolve_name(name.encode()))
        return None if nr == _NR_SCMP_ERROR or nr < 0 else nr

    def add(self, action: int, name: str, comparisons: Iterable[Comparison] = ()) -> bool:
        """Add one rule; ``False`` when the architecture has no such call (nothing to filter)."""
        nr = self.resolve(name)
        if nr is None:
            return False
        cmps = [_ArgCmp(arg, op, a & 0xFFFFFFFFFFFFFFFF, b & 0xFFFFFFFFFFFFFFFF) for arg, op, a, b in comparisons]
        array = (_ArgCmp * max(len(cmps), 1))(*cmps)
        _check(self._lib.seccomp_rule_add_array(self._ctx, action, nr, len(cmps), array), f"rule for {name}")
        return True

    def load(self) -> None:
        _check(self._lib.seccomp_load(self._ctx), "seccomp_load")

    def pfc(self) -> str:
        """The filter as libseccomp's pseudo-filter-code text (for tests and inspection)."""
        import tempfile  # only for inspection: the shim never pays for it

        with tempfile.TemporaryFile() as out:
            _check(self._lib.seccomp_export_pfc(self._ctx, out.fileno()), "seccomp_export_pfc")
            out.seek(0)
            return out.read().decode()

    def release(self) -> None:
        if self._ctx is not None:
            self._lib.seccomp_release(self._ctx)
            self._ctx = None


def api_level(lib: ctypes.CDLL | None = None) -> int:
    """libseccomp's view of what the kernel supports (0: no seccomp filter mode at all)."""
    return int((lib or library()).seccomp_api_get())
