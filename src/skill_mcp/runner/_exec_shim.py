"""Re-exec shim: applies limits and the uid drop, then becomes the interpreter.

Run as ``python -I -S _exec_shim.py CFG_FD STATUS_FD`` by ``spawn_local`` (never imported).
It exists so that nothing runs between ``fork`` and ``exec`` in the server: Python's
``preexec_fn`` is unsafe in a threaded process, and ``subprocess`` has no rlimit option.
Standard library only; ``-I -S`` keeps the caller's environment and site-packages out of it.

Protocol: the parent writes one ``marshal``-encoded dict to ``CFG_FD`` (argv, env, rlimits, optional
uid/gid) and closes it; the values travel through a pipe, never through this process's
argv or environment, so they do not show up in ``/proc/<pid>/cmdline``. ``STATUS_FD`` is
close-on-exec: the parent sees EOF with no bytes when ``execve`` succeeded, or one line
saying what failed.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import resource
import signal
import sys

# typing and json are not imported at run time: they cost tens of milliseconds on every run.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
_LIMITS = {"core": resource.RLIMIT_CORE, "nofile": resource.RLIMIT_NOFILE, "fsize": resource.RLIMIT_FSIZE,
           "nproc": resource.RLIMIT_NPROC}


def _read_all(fd: int) -> dict[str, Any]:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    cfg: dict[str, Any] = marshal.loads(b"".join(chunks))  # noqa: S302 - our own parent wrote it, over a private pipe
    return cfg


def _drop(uid: int, gid: int) -> None:
    # Order matters: groups and gid while still root, uid last; then prove it stuck.
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise RuntimeError("the uid drop did not stick")


def main() -> None:
    cfg_fd, status_fd = int(sys.argv[1]), int(sys.argv[2])
    os.set_inheritable(status_fd, False)  # closes on a successful execve: EOF means "running"
    try:
        cfg = _read_all(cfg_fd)
        for name, (soft, hard) in cfg.get("rlimits", {}).items():
            resource.setrlimit(_LIMITS[name], (soft, hard))
        if cfg.get("uid") is not None:
            _drop(int(cfg["uid"]), int(cfg["gid"]))
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        # If the server dies (even by SIGKILL) the script must not outlive its only supervisor.
        # Set after the uid drop, which clears it; it survives the execve below. Then close the race
        # where the server died before this line: our parent would already be someone else.
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if cfg.get("parent") is not None and os.getppid() != cfg["parent"]:
            raise RuntimeError("the server exited before the script started")
        # Python ignores SIGPIPE and SIGXFSZ at startup and an ignored signal survives execve;
        # the script must get the default actions (a write to a closed pipe ends it).
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        argv = cfg["argv"]
        os.execve(argv[0], argv, cfg["env"])  # noqa: S606 - an argv array is the point: no shell
    except BaseException as exc:  # every failure must reach the parent
        os.write(status_fd, f"{type(exc).__name__}: {exc}".encode(errors="replace")[:4000])
        os._exit(127)


if __name__ == "__main__":
    main()
