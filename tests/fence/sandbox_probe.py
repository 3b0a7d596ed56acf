"""A child that confines itself with the rules it is given, then tries each named call.

Run by ``test_sandbox_bindings.py`` as ``python sandbox_probe.py RULES_JSON PROBE...``, never
imported: applying a sandbox is for good, so it happens in a process of its own (a fork of the
threaded test process would be unsafe). ``RULES_JSON`` is a ``sandbox_rules.Sandbox`` wire form, or
``null`` for the unconfined positive control. Prints ``{probe: errno}`` (0: the call worked).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
import sys
from collections.abc import Callable

from skill_mcp import confine

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
IPC_CREAT, IPC_RMID = 0o1000, 0
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
NR = {"io_uring_setup": 425, "clone": 56, "clone3": 435, "keyctl": 250, "bpf": 321, "userfaultfd": 323}


def _closed(*sockets: socket.socket) -> int:
    """Opening the sockets worked (a denial raises first): close them and say 0."""
    for sock in sockets:
        sock.close()
    return 0


def _signalled(pid: int) -> int:
    os.kill(pid, 0)
    return 0


def _libc(result: int) -> int:
    return ctypes.get_errno() if result == -1 else 0


def _open(path: str, flags: int) -> int:
    fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
    os.close(fd)
    return 0


def _connect(port: int) -> int:
    with socket.socket() as s:
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
    return 0


def _bind() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
    return 0


def _fork_exit() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return 0


def _shmget() -> int:
    shm = LIBC.shmget(0, 4096, IPC_CREAT | 0o600)
    if shm >= 0:
        LIBC.shmctl(shm, IPC_RMID, None)
    return _libc(shm)


def probes(arg: str) -> Callable[[], int]:
    name, _, param = arg.partition(":")
    table: dict[str, Callable[[], int]] = {
        "read": lambda: _open(param, os.O_RDONLY),
        "write": lambda: _open(param, os.O_WRONLY | os.O_CREAT),
        "connect": lambda: _connect(int(param)),
        "bind": _bind,
        "shmget": _shmget,
        "msgget": lambda: _libc(LIBC.msgget(0, IPC_CREAT | 0o600)),
        "semget": lambda: _libc(LIBC.semget(0, 1, IPC_CREAT | 0o600)),
        "mq_open": lambda: _libc(LIBC.mq_open(b"/skill-mcp-probe", os.O_CREAT | os.O_RDWR, 0o600, None)),
        "io_uring_setup": lambda: _libc(LIBC.syscall(NR["io_uring_setup"], 1, None)),
        "ptrace": lambda: _libc(LIBC.ptrace(0, 0, None, None)),
        "unshare": lambda: _libc(LIBC.unshare(CLONE_NEWUSER)),
        "clone_newuser": lambda: _libc(LIBC.syscall(NR["clone"], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)),
        "clone3": lambda: _libc(LIBC.syscall(NR["clone3"], None, 0)),
        "fork": _fork_exit,
        "keyctl": lambda: _libc(LIBC.syscall(NR["keyctl"], 0, -3, 0)),  # KEYCTL_GET_KEYRING_ID, session
        "bpf": lambda: _libc(LIBC.syscall(NR["bpf"], 0, None, 0)),
        "userfaultfd": lambda: _libc(LIBC.syscall(NR["userfaultfd"], 0)),
        "socket_inet": lambda: _closed(socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
        "socket_udp": lambda: _closed(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
        "socket_unix": lambda: _closed(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
        "socket_netlink": lambda: _closed(socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
        "socketpair": lambda: _closed(*socket.socketpair()),
        "signal_parent": lambda: _signalled(os.getppid()),
    }
    return table[name]


def main() -> None:
    rules = json.loads(sys.argv[1])
    if rules is not None:
        if LIBC.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "no-new-privs")
        confine.apply(rules)
    out: dict[str, int] = {}
    for arg in sys.argv[2:]:
        try:
            out[arg] = probes(arg)()
        except OSError as exc:
            out[arg] = exc.errno or errno.EIO
    print(json.dumps(out))


if __name__ == "__main__":
    main()
