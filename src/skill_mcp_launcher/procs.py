"""Users, privilege drops, reaping and the per-uid sweep.

Every child the launcher starts is made by ``os.fork`` followed by the drop and ``execve``
in the child. That is safe here because the launcher is single-threaded by design (no
thread is ever started), and it is explicit: the drop is an ordered pipeline - groups, gid,
uid, then no-new-privileges - checked by reading the kernel's view back before exec.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import selectors
import signal
import time
from dataclasses import dataclass, field

import psutil

from skill_mcp_launcher import caps, isolation


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    uid: int
    gid: int


@dataclass(frozen=True, slots=True)
class Users:
    server: Account
    script: Account
    proxy: Account


SERVER_USER = ("skillmcp-server", 10001)
SCRIPT_USER = ("skillmcp-script", 10002)
PROXY_USER = ("skillmcp-proxy", 10003)


def lookup_users() -> Users:
    """Read the three baked-in accounts and insist on the uids the nftables ruleset names."""
    found = []
    for name, uid in (SERVER_USER, SCRIPT_USER, PROXY_USER):
        entry = pwd.getpwnam(name)
        if entry.pw_uid != uid or entry.pw_gid == 0:
            raise RuntimeError(f"user {name} has uid {entry.pw_uid} gid {entry.pw_gid}; the ruleset expects {uid}")
        found.append(Account(name, entry.pw_uid, entry.pw_gid))
    return Users(*found)


def drop_to(account: Account) -> None:
    """Become ``account`` for good: no supplementary groups, all three ids, then verify.

    Moving every uid away from 0 clears the permitted and effective capability sets (no
    SECBIT_KEEP_CAPS is ever set), which ``read_state`` then confirms.
    """
    os.setgroups([])
    os.setresgid(account.gid, account.gid, account.gid)
    os.setresuid(account.uid, account.uid, account.uid)
    if os.getresuid() != (account.uid,) * 3 or os.getresgid() != (account.gid,) * 3 or os.getgroups():
        raise RuntimeError("the uid/gid drop did not take effect")
    caps.set_no_new_privs()
    state = caps.read_state()
    if state.effective or state.permitted or state.inheritable or state.ambient:
        raise RuntimeError("capabilities survived the uid drop")


def reset_signals() -> None:
    """In a fresh child: no wakeup fd, default dispositions, nothing blocked.

    Python ignores SIGPIPE and SIGXFSZ, and ``execve`` keeps ignored signals ignored; a
    script must see the defaults (SIGXFSZ is how RLIMIT_FSIZE stops a writer).
    """
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def close_fds_from(low: int, keep: tuple[int, ...] = ()) -> None:
    """Close every descriptor >= ``low`` except ``keep`` (in a child, before exec)."""
    top = 65536
    start = low
    for fd in sorted(k for k in keep if k >= low):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, top)


@dataclass(slots=True)
class Reaper:
    """Collects exit statuses of every child; remembers only the pids someone watches.

    As PID 1 (or a child subreaper) we inherit every orphan, including a script's detached
    grandchildren and a fork bomb's debris; all of them are reaped here and forgotten.
    """

    watched: set[int] = field(default_factory=set)
    statuses: dict[int, int] = field(default_factory=dict)

    def watch(self, pid: int) -> None:
        self.watched.add(pid)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.watched:
                self.watched.discard(pid)
                self.statuses[pid] = status

    def pop(self, pid: int) -> int | None:
        return self.statuses.pop(pid, None)

    def wait(self, pid: int, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for a watched ``pid`` to exit; its status, or None."""
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.reap()
            return self.pop(pid)
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(pidfd, selectors.EVENT_READ)
                deadline = time.monotonic() + timeout
                while pid not in self.statuses:
                    self.reap()
                    left = deadline - time.monotonic()
                    if pid in self.statuses or left <= 0:
                        break
                    sel.select(min(left, 0.05))
        finally:
            os.close(pidfd)
        return self.pop(pid)


def pids_of(uid: int) -> list[int]:
    """Every process (zombies included) whose real uid is ``uid``, through psutil."""
    return [p.pid for p in psutil.process_iter(["uids"]) if p.info["uids"] is not None and p.info["uids"].real == uid]


def _as_user(account: Account, reaper: Reaper, deadline: float, *, kill: bool, scratch: tuple[str, ...]) -> None:
    """Fork a child that becomes ``account`` and kills all its processes, or removes what it left."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            reset_signals()
            drop_to(account)
            if kill:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)
            else:
                isolation.remove_leftovers(account.uid, scratch)
        except BaseException:
            code = 1
        os._exit(code)
    reaper.watch(pid)
    reaper.wait(pid, max(0.1, deadline - time.monotonic()))


def sweep(account: Account, reaper: Reaper, *, scratch: tuple[str, ...] = (), timeout: float = 5.0) -> int:
    """Kill every process of ``account``, remove what it left and its ``scratch`` directories;
    return how many of its processes remain.

    ``kill(-1, SIGKILL)`` is executed by a child that has become ``account``: the kernel
    then signals exactly the processes that uid may signal, which are its own - including a
    grandchild that detached into its own session. The kill repeats (a fork bomb may be
    mid-fork) until no process of the uid is left, zombies included, or the bound ends. Only
    then, with nothing of the uid left to write, its files and IPC objects are removed
    (``isolation.remove_leftovers``, as that uid) and root removes the emptied scratch directories.
    """
    deadline = time.monotonic() + timeout
    while True:
        _as_user(account, reaper, deadline, kill=True, scratch=())
        reaper.reap()
        left = pids_of(account.uid)
        if not left or time.monotonic() >= deadline:
            break
        # Killed processes take a moment to become zombies that we can reap.
        time.sleep(0.005)
    _as_user(account, reaper, deadline + 2.0, kill=False, scratch=scratch)
    for path in scratch:
        isolation.remove_scratch(path)
    return len(left)
