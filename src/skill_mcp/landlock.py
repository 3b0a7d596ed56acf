"""A small ctypes binding of Landlock (``include/uapi/linux/landlock.h``): probe, build, restrict.

No maintained Python binding of Landlock exists, so the three system calls are made here, with
the constants of the kernel's uapi header. The standard library only: the stdlib-only exec
shim and the launcher import it (docs/fence.md, "The sandbox", says why this and not a package).

A ruleset handles every right the running kernel's ABI knows, as the kernel's own
``samples/landlock/sandboxer.c`` does: a right the ABI lacks is left out on purpose (it is then
not restricted at all), never asked for and refused. Every failure raises ``LandlockError``
(an ``OSError`` with the errno); nothing here returns a bool for a failed step.

What a run may read, write and reach is not written here: the rules are data in
``sandbox_rules.sandbox_rules``, turned into a ruleset by ``confine.build_ruleset``.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

# System call numbers: the same on x86_64 and aarch64 (the generic table).
_NR = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}

CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2

# Filesystem rights, with the ABI that introduced each.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
# Rights that mean something on a file that is not a directory; a rule on such a file may hold
# only these (the kernel refuses the others with EINVAL).
FS_FILE = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR  # read and execute, the runtime's rights
FS_ALL = FS_ABI1 | FS_REFER | FS_TRUNCATE | FS_IOCTL_DEV


class LandlockError(OSError):
    """A Landlock call failed; ``errno`` says why (ENOSYS / EOPNOTSUPP: the kernel has none)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the uapi header
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPortAttr(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


def _numbers() -> tuple[int, int, int]:
    machine = os.uname().machine
    if machine not in _NR:
        raise LandlockError(38, f"no Landlock system call numbers known for {machine}")  # ENOSYS
    return _NR[machine]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _call(nr: int, *args: object) -> int:
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(ctypes.c_long(nr), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, os.strerror(err))
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI; ``LandlockError`` when it has none (or it is disabled, or filtered)."""
    create, _, _ = _numbers()
    return _call(create, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))


def fs_rights(abi: int) -> int:
    """Every filesystem right ``abi`` knows (sandboxer.c's degradation, as a function)."""
    rights = FS_ABI1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def net_rights(abi: int) -> int:
    return NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0


def scopes(abi: int) -> int:
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0


class Ruleset:
    """One ruleset being built: rules are added, then ``restrict_self`` applies it for good."""

    def __init__(self, abi: int, *, handle_net: bool, scope: bool) -> None:
        self.abi = abi
        self.fs = fs_rights(abi)
        self.net = net_rights(abi) if handle_net else 0
        attr = _RulesetAttr(self.fs, self.net, scopes(abi) if scope else 0)
        create, self._add, self._restrict = _numbers()
        self.fd = _call(create, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))

    def allow_path(self, path: str, access: int) -> None:
        """Allow ``access`` (masked to what this ABI handles, and to file rights on a file) beneath ``path``."""
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            allowed = access & self.fs
            if not os.path.isdir(f"/proc/self/fd/{fd}"):
                allowed &= FS_FILE
            if allowed:
                attr = _PathBeneathAttr(allowed, fd)
                _call(
                    self._add,
                    ctypes.c_int(self.fd),
                    ctypes.c_int(RULE_PATH_BENEATH),
                    ctypes.byref(attr),
                    ctypes.c_uint32(0),
                )
        finally:
            os.close(fd)

    def allow_ports(self, ports: Iterable[int], access: int) -> None:
        """Allow ``access`` (NET_CONNECT_TCP, NET_BIND_TCP) to each TCP port; nothing when net is not handled."""
        allowed = access & self.net
        for port in ports:
            if allowed:
                attr = _NetPortAttr(allowed, port)
                _call(
                    self._add,
                    ctypes.c_int(self.fd),
                    ctypes.c_int(RULE_NET_PORT),
                    ctypes.byref(attr),
                    ctypes.c_uint32(0),
                )

    def restrict_self(self) -> None:
        """Enforce the ruleset on this thread (and everything it execs or forks); needs no-new-privs."""
        try:
            _call(self._restrict, ctypes.c_int(self.fd), ctypes.c_uint32(0))
        finally:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
