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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import psutil

from skill_mcp import trees
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


CLEANUP_PENDING_EXIT = 3  # the clean-up child's status when something of the uid is still there


def _as_user(account: Account, reaper: Reaper, *, kill: bool, scratch: tuple[str, ...] = ()) -> int:
    """Fork a child that becomes ``account`` and kills all its processes, or removes what it left;
    return its pid (watched by ``reaper``). Exit 0: done; ``CLEANUP_PENDING_EXIT``: the removal
    left something (``trees.NotRemoved``); 1: anything else failed."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            reset_signals()
            drop_to(account)
            if kill:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)
            else:
                isolation.remove_leftovers(account.uid, scratch)
            code = 0
        except trees.NotRemoved as exc:
            code = CLEANUP_PENDING_EXIT
            with contextlib.suppress(BaseException):
                os.write(2, f"clean-up as uid {account.uid} incomplete: {exc}\n".encode(errors="replace")[:4000])
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(2, f"clean-up as uid {account.uid} failed: {exc!r}\n".encode(errors="replace")[:4000])
        os._exit(code)
    reaper.watch(pid)
    return pid


def kill_all(account: Account, reaper: Reaper, timeout: float) -> int:
    """Kill every process of ``account``; return how many are left when the bound ends.

    ``kill(-1, SIGKILL)`` is executed by a child that has become ``account``: the kernel
    then signals exactly the processes that uid may signal, which are its own - including a
    grandchild that detached into its own session. The kill repeats (a fork bomb may be
    mid-fork) until no process of the uid is left, zombies included, or the bound ends.
    """
    deadline = time.monotonic() + timeout
    while True:
        pid = _as_user(account, reaper, kill=True)
        reaper.wait(pid, max(0.1, deadline - time.monotonic()))
        reaper.reap()
        left = pids_of(account.uid)
        if not left or time.monotonic() >= deadline:
            return len(left)
        # Killed processes take a moment to become zombies that we can reap.
        time.sleep(0.005)


CleanupState = Literal["done", "running", "failed"]


@dataclass(slots=True)
class Cleanup:
    """The removal of everything one uid's runs left; it may outlast the request that started it.

    The removal runs in a child *as* that uid (``isolation.remove_leftovers``), so a kill sweep of
    the uid would end it half-done; and a run started beside it would see what it has not removed
    yet. So: while it runs, nothing of the uid is swept and no run starts (``state`` is
    ``running``; the broker refuses with ``cleanup-pending``). Once it has exited, its status and
    what is really left are judged: ``done`` only when it exited 0, every run directory is gone
    and the kill sweep before it left no process; otherwise ``failed``, and the next ``ensure``
    sweeps and starts it again, with every run directory not yet removed.
    """

    account: Account
    scratch: list[str] = field(default_factory=list)  # run directories not removed yet
    pid: int | None = None  # the clean-up child while it runs
    failure: str | None = None  # why the clean-up is not complete; None when it is
    remaining: int = 0  # processes of the uid that the last kill sweep left

    @property
    def state(self) -> CleanupState:
        if self.pid is not None:
            return "running"
        return "failed" if self.failure is not None else "done"

    def start(
        self,
        reaper: Reaper,
        scratch: tuple[str, ...] = (),
        kill_timeout: float = 5.0,
        between: Callable[[], object] | None = None,
    ) -> None:
        """Kill every process of the uid, then start the clean-up child. Never while one runs.

        ``between`` runs after the kill and before the removal: the one moment what the run
        left can be read with nothing of the uid alive to change it (a run's outputs)."""
        if self.pid is not None:
            raise RuntimeError("a clean-up of this uid is still running; sweeping now would end it")
        self.scratch.extend(p for p in scratch if p not in self.scratch)
        self.remaining = kill_all(self.account, reaper, kill_timeout)
        if between is not None:
            between()
        self.failure = "the clean-up is still running"
        self.pid = _as_user(self.account, reaper, kill=False, scratch=tuple(self.scratch))

    def settle(self, reaper: Reaper, timeout: float) -> CleanupState:
        """Wait up to ``timeout`` s for a running clean-up; once it has exited, judge it."""
        if self.pid is None:
            return self.state
        status = reaper.wait(self.pid, max(0.0, timeout))
        if status is None:
            return "running"
        self.pid = None
        # Root's half: the emptied run directories (the script uid cannot remove them).
        self.scratch = [p for p in self.scratch if not isolation.remove_scratch(p)]
        if status != 0:
            code = os.waitstatus_to_exitcode(status)
            self.failure = (
                "something of the script user could not be removed"
                if code == CLEANUP_PENDING_EXIT
                else f"the clean-up child ended with status {code}"
            )
        elif self.scratch:
            self.failure = f"{len(self.scratch)} run directories are still there"
        elif self.remaining:
            self.failure = f"{self.remaining} processes of the script user survived the kill sweep"
        else:
            self.failure = None
        return self.state

    def ensure(self, reaper: Reaper, timeout: float) -> CleanupState:
        """Before a run: continue a running clean-up, or retry a failed one; ``done`` when the run may
        start. Bounded by about three times ``timeout``."""
        state = self.settle(reaper, timeout)
        if state == "failed":
            self.start(reaper, kill_timeout=timeout)
            state = self.settle(reaper, timeout)
        return state

    def after_run(
        self, reaper: Reaper, scratch: str, timeout: float = 5.0, between: Callable[[], object] | None = None
    ) -> CleanupState:
        """After a run: kill the uid (up to ``timeout``), start removing what it left, and wait for
        that until 2 s past the same bound; what is not done by then stays ``running`` for the next
        request to wait on (the reply to this one must not wait on a million files)."""
        deadline = time.monotonic() + timeout + 2.0
        self.start(reaper, (scratch,), kill_timeout=timeout, between=between)
        return self.settle(reaper, max(0.5, deadline - time.monotonic()))

    def report(self) -> dict[str, object]:
        """The sweep as the broker's reply carries it."""
        out: dict[str, object] = {"cleanup": self.state}
        if self.failure is not None:
            out["cleanupDetail"] = self.failure
        return out


def sweep(account: Account, reaper: Reaper, *, scratch: tuple[str, ...] = (), timeout: float = 5.0) -> int:
    """Kill every process of ``account`` and remove what it left, waiting up to ``timeout`` for the
    removal; return how many of its processes remain. For the uids whose clean-up nothing waits
    on (the proxy's); the script uid's goes through a ``Cleanup`` the broker keeps."""
    cleanup = Cleanup(account)
    cleanup.start(reaper, scratch, kill_timeout=timeout)
    if cleanup.settle(reaper, 2.0) == "running" and cleanup.pid is not None:
        reaper.watched.discard(cleanup.pid)  # reaped and forgotten whenever it ends
    return cleanup.remaining
