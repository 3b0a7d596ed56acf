"""The per-run kernel sandbox, as data: what a script may read, write and reach, and the system
calls it may not make, in both forms (standalone and appliance).

``sandbox_rules`` is pure; ``standalone_sandbox`` (the local spawner) and ``appliance_sandbox``
(the broker, from its own decision) call it; ``skill_mcp.confine`` applies the result before
``execve`` through the bindings ``skill_mcp.landlock`` and ``skill_mcp.seccomp``. A leaf: the
standard library only, so the launcher may import it (docs/fence.md, "The sandbox").
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# The per-run kernel sandbox (docs/fence.md, "The sandbox"): what a script may read, write and
# reach, in both forms, applied by the process that execs it (``skill_mcp.confine``).
#
# The lowest Landlock ABI a run is confined with: below 3 a script could truncate any file its
# uid may write, which is a write outside its run directory. What 3, 4 and 5 lose is said in
# docs/fence.md; the seccomp filter closes the network on its own where TCP rules are missing.
MIN_LANDLOCK_ABI = 3
# Read and execute: the runtime the closed interpreter set needs (each interpreter's own
# installation prefix is added). A directory that does not exist here is skipped.
RUNTIME_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc")
# Read only: /proc (Landlock keeps a sandboxed process from the ptrace-guarded files of any
# process outside its domain, such as the server's environ and memory) and what the runtimes
# read of /sys (libuv's CPU count and cgroup limits).
KERNEL_READ = ("/proc", "/sys/devices/system/cpu", "/sys/fs/cgroup")
DEVICES_READ = ("/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty")
DEVICES_WRITE = ("/dev/null",)
# Access levels of a path rule (``confine`` maps them to Landlock rights).
READ_EXEC, READ, READ_WRITE_FILE, READ_FILE, WRITE_ALL = "read-exec", "read", "read-write-file", "read-file", "all"
# Refused with EPERM whatever the run: System V and POSIX IPC (shared with every run of the
# uid), io_uring (outside the filter's sight), tracing and another process's memory, kernel
# keyrings, BPF, perf, userfaultfd, mounts, namespaces, handles, kexec and kernel modules.
DENIED_SYSCALLS = (
    "shmget",
    "msgget",
    "semget",
    "ipc",
    "mq_open",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
)
# clone() with any of these flags is refused (clone3 answers ENOSYS, so libc falls back to
# clone, whose flags the filter can read): NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
CLONE_NEW_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
ENOSYS_SYSCALLS = ("clone3",)
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10


@dataclass(frozen=True, slots=True)
class Sandbox:
    """One run's kernel sandbox, as data: built by ``sandbox_rules``, applied by ``confine.apply``.

    ``paths``: (path, access level, required); a path that is not required and does not exist is
    skipped. ``tcp_connect``: the TCP ports the script may connect to (it may bind none); ``None``
    leaves TCP to the kernel (a standalone script whose skill declares egress). ``inet``: whether
    the filter lets it make IPv4/IPv6 sockets at all (never a unix socket: only ``socketpair``).
    """

    paths: tuple[tuple[str, str, bool], ...]
    tcp_connect: tuple[int, ...] | None
    inet: bool
    denied: tuple[str, ...] = DENIED_SYSCALLS
    enosys: tuple[str, ...] = ENOSYS_SYSCALLS
    clone_flags: tuple[int, ...] = CLONE_NEW_FLAGS
    min_abi: int = MIN_LANDLOCK_ABI

    def wire(self) -> dict[str, Any]:
        """Plain values only, for ``marshal`` to the exec shim (which imports no dataclass)."""
        return {
            "paths": [list(p) for p in self.paths],
            "tcp_connect": self.tcp_connect,
            "inet": self.inet,
            "denied": list(self.denied),
            "enosys": list(self.enosys),
            "clone_flags": list(self.clone_flags),
            "min_abi": self.min_abi,
        }


def interpreter_prefixes(real_paths: Iterable[str]) -> tuple[str, ...]:
    """Each interpreter's installation prefix: ``/opt/x`` for ``/opt/x/bin/python3.11``."""
    prefixes: list[str] = []
    for path in real_paths:
        parent = os.path.dirname(path)
        prefix = os.path.dirname(parent) if os.path.basename(parent) == "bin" else parent
        if prefix not in ("", "/") and prefix not in prefixes:
            prefixes.append(prefix)
    return tuple(prefixes)


def sandbox_rules(
    *,
    skill_dir: str,
    run_dir: str,
    interpreters: Iterable[str],
    data_dir: str | None = None,
    tcp_connect: tuple[int, ...] | None = (),
    inet: bool = False,
) -> Sandbox:
    """Pure: the sandbox of one run. The two forms call it through ``standalone_sandbox`` and
    ``appliance_sandbox``; nothing a declaration or ``MCP_SKILL_RUN`` says reaches it but egress."""
    paths: list[tuple[str, str, bool]] = [(p, READ_EXEC, False) for p in RUNTIME_READ]
    paths += [(p, READ_EXEC, False) for p in interpreter_prefixes(interpreters) if p not in RUNTIME_READ]
    paths += [(p, READ, False) for p in KERNEL_READ]
    paths += [(p, READ_FILE, False) for p in DEVICES_READ]
    paths += [(p, READ_WRITE_FILE, False) for p in DEVICES_WRITE]
    paths += [(skill_dir, READ_EXEC, True), (run_dir, WRITE_ALL, True)]
    if data_dir:
        paths.append((data_dir, WRITE_ALL, True))
    return Sandbox(paths=tuple(paths), tcp_connect=tcp_connect, inet=inet)


def standalone_sandbox(
    *, skill_dir: str, run_dir: str, interpreters: Iterable[str], data_dir: str | None, egress: bool
) -> Sandbox:
    """Standalone: no network at all unless the skill declares egress; then the network is the
    kernel's (hosts cannot be held to a list without the appliance's proxy and nftables)."""
    return sandbox_rules(
        skill_dir=skill_dir,
        run_dir=run_dir,
        interpreters=interpreters,
        data_dir=data_dir,
        tcp_connect=None if egress else (),
        inet=egress,
    )


def appliance_sandbox(*, skill_dir: str, scratch: str, interpreters: Iterable[str], proxy_port: int) -> Sandbox:
    """The appliance: TCP connect to the egress proxy's port only, no bind; writes in the scratch only."""
    return sandbox_rules(
        skill_dir=skill_dir, run_dir=scratch, interpreters=interpreters, tcp_connect=(proxy_port,), inet=True
    )


def sandbox_table(proxy_port: int) -> dict[str, tuple[str, str]]:
    """The sandbox's rows of docs/fence.md's limits table: (standalone, appliance)."""
    reads = (
        ", ".join(RUNTIME_READ)
        + " and each interpreter's prefix (read, execute); "
        + ", ".join(KERNEL_READ)
        + " (read); "
        + ", ".join(DEVICES_READ + DEVICES_WRITE)
        + "; its own skill directory"
    )
    same = {
        "sandbox: reads": (reads, reads),
        "sandbox: writes": (
            "its run directory (TMPDIR, HOME), MCP_DATA_DIR when set, /dev/null",
            "its run directory (TMPDIR, HOME), /dev/null",
        ),
        "sandbox: TCP": ("none without declared egress; any with it", f"connect to port {proxy_port} only; no bind"),
        "sandbox: sockets": (
            "socketpair(AF_UNIX) only without declared egress; IPv4/IPv6 with it; never a unix socket",
            "IPv4/IPv6 and socketpair(AF_UNIX); never a unix socket",
        ),
        "sandbox: scopes": ("abstract unix sockets and signals", "abstract unix sockets and signals"),
        "sandbox: refused calls": (f"{len(DENIED_SYSCALLS)} calls (EPERM), clone with CLONE_NEW*, clone3 (ENOSYS)",)
        * 2,
        "sandbox: minimum Landlock ABI": (
            f"{MIN_LANDLOCK_ABI} (else refused, or SKILL_MCP_UNCONFINED=1)",
            f"{MIN_LANDLOCK_ABI} (else sandbox-unavailable)",
        ),
    }
    return same
