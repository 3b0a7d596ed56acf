"""Re-exec shim: applies limits and the uid drop, then becomes the interpreter.

Run as ``python -I -S _exec_shim.py CFG_FD STATUS_FD SERVER_PID PRCTL_DIR PACKAGE_DIR`` by ``runner.shim``
(never imported by the server). It exists so that nothing runs between ``fork`` and ``exec`` in
the server: Python's ``preexec_fn`` is unsafe in a threaded process, and ``subprocess`` has no
rlimit option. The standard library and ``python-prctl`` only (dumpable, the parent-death signal,
no-new-privileges), found in ``PRCTL_DIR`` - the server's own site-packages - because ``-I -S``
keeps the caller's environment and site-packages out of it; the server starts it with an empty
environment. ``PACKAGE_DIR`` is the directory holding the server's ``skill_mcp`` package, for the
one leaf it imports from it: ``skill_mcp.confine`` (Landlock and seccomp through ctypes).

It may be started ahead of the run it will serve (a *warm* shim): it imports what it needs,
makes itself non-dumpable, ties its life to the server's (``PR_SET_PDEATHSIG``, then the check
that the server is still its parent) and blocks reading ``CFG_FD``. A run costs it only what
comes after that read. It serves at most one run: it execs or exits.

Protocol: the parent writes one ``marshal``-encoded dict to ``CFG_FD`` (argv, env, cwd, rlimits,
optional uid/gid, the script's ``oom_score_adj``, and ``sandbox``: the run's ``sandbox_rules.Sandbox`` in its
wire form, or ``None`` only when the owner opted out of confinement) and closes it; the values travel through a pipe, never
through this process's argv or environment, so they do not show up in ``/proc/<pid>/cmdline``
or ``/proc/<pid>/environ``. EOF with no configuration means the server discarded this shim or
died: it exits at once. ``STATUS_FD`` is close-on-exec. Just before ``execve`` the shim writes
one ``EXEC_NEXT`` byte; the parent then reads:

- ``EXEC_NEXT`` then EOF: ``execve`` succeeded, the process is the script now;
- ``EXEC_NEXT`` or nothing, then one line: what failed (the shim exits 127);
- EOF with nothing at all: the shim died before it reached ``execve`` (killed while it waited,
  say), so nothing of the run happened and the parent may start another shim for it.
"""

from __future__ import annotations

import marshal
import os
import resource
import sys

# typing, json and the ``signal`` wrapper (which imports enum) are not imported at run time:
# together they cost about as much as the interpreter's own start-up, on every cold start and
# before a warm shim is ready. ``_signal`` is the C module the wrapper wraps. python-prctl is
# imported while a warm shim waits, so a run does not pay for it (figures in bench/README.md,
# "Figures behind design choices").
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    from typing import Any
else:
    import _signal

EXEC_NEXT = b"\x00"  # a failure line is text, so it never starts with NUL
_LIMITS = {
    "core": resource.RLIMIT_CORE,
    "nofile": resource.RLIMIT_NOFILE,
    "fsize": resource.RLIMIT_FSIZE,
    "nproc": resource.RLIMIT_NPROC,
}


def _read_all(fd: int) -> dict[str, Any] | None:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    if not chunks:
        return None
    cfg: dict[str, Any] = marshal.loads(b"".join(chunks))  # noqa: S302 - our own parent wrote it, over a private pipe
    return cfg


def _die_with(prctl: Any, server: int) -> None:
    # If the server dies (even by SIGKILL) this process must not outlive its only supervisor.
    # Then close the race where the server died before this line: our parent would already be
    # someone else (init or a subreaper), and no signal would ever come.
    prctl.set_pdeathsig(_signal.SIGKILL)
    if os.getppid() != server:
        raise RuntimeError("the server exited before the script started")


def _drop(uid: int, gid: int) -> None:
    # Order matters: groups and gid while still root, uid last; then prove it stuck.
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise RuntimeError("the uid drop did not stick")


# The script is the OOM killer's first choice, never the server (skill_mcp.limits, which this
# stdlib-only file cannot import, holds the value; the run's configuration repeats it and
# ``_become`` checks the two agree).
OOM_SCORE_ADJ = 1000
_OOM_PATH = "/proc/self/oom_score_adj"


def _mark_for_oom() -> None:
    # At start, while this process is still dumpable: once it is not, its /proc files belong to
    # root and a shim under the server's own uid could not open this one. Raising a score needs no
    # privilege; it is inherited by the script (execve keeps it) and everything the script forks.
    fd = os.open(_OOM_PATH, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, str(OOM_SCORE_ADJ).encode())
    finally:
        os.close(fd)


def _check_oom_score(wanted: int) -> None:
    with open(_OOM_PATH, "rb") as fh:
        got = int(fh.read().strip())
    if got != wanted:
        raise RuntimeError(f"oom_score_adj is {got}, the run asks for {wanted}")


def _become(cfg: dict[str, Any], prctl: Any, confine: Any, server: int, status_fd: int) -> None:
    os.chdir(cfg["cwd"])
    for name, (soft, hard) in cfg.get("rlimits", {}).items():
        resource.setrlimit(_LIMITS[name], (soft, hard))
    if cfg.get("uid") is not None:
        _drop(int(cfg["uid"]), int(cfg["gid"]))
    prctl.set_no_new_privs(1)
    _die_with(prctl, server)  # again: the uid drop cleared the parent-death signal; it survives execve
    # Python ignores SIGPIPE and SIGXFSZ at startup and an ignored signal survives execve;
    # the script must get the default actions (a write to a closed pipe ends it).
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(sig, _signal.SIG_DFL)
    if cfg.get("oom_score_adj") is not None:
        _check_oom_score(int(cfg["oom_score_adj"]))
    if cfg.get("sandbox") is not None:
        # Last, after no-new-privileges and the uid drop: from here on this process (and the
        # script it becomes) reads, writes and reaches only what the rules allow.
        confine.apply(cfg["sandbox"])
    argv = cfg["argv"]
    os.write(status_fd, EXEC_NEXT)
    os.execve(argv[0], argv, cfg["env"])  # noqa: S606 - an argv array is the point: no shell


def main() -> None:
    cfg_fd, status_fd, server = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    os.set_inheritable(status_fd, False)  # closes on a successful execve: EOF means "running"
    try:
        _mark_for_oom()
        sys.path.append(sys.argv[4])
        sys.path.append(sys.argv[5])
        import prctl

        from skill_mcp import confine

        # Load libseccomp and touch the ctypes paths now, while the shim may still be waiting, so a
        # run pays about 1.5 ms for its sandbox rather than three times that on first use. A kernel
        # that cannot confine is reported by the apply at the run, not here.
        try:  # noqa: SIM105 - contextlib is one import more on every cold start
            confine.probe(0)
        except confine.SandboxUnavailable:
            pass

        # While it waits (possibly for minutes) no same-uid process may ptrace it or read its
        # memory; execve makes the script dumpable again, as it would be without the shim.
        prctl.set_dumpable(False)
        _die_with(prctl, server)
        cfg = _read_all(cfg_fd)  # a warm shim waits here
        if cfg is None:
            os._exit(0)  # discarded, or the server is gone: nothing to report, nobody to report to
        _become(cfg, prctl, confine, server, status_fd)
    except BaseException as exc:  # every failure must reach the parent
        os.write(status_fd, f"{type(exc).__name__}: {exc}".encode(errors="replace")[:4000])
        os._exit(127)


if __name__ == "__main__":
    main()
