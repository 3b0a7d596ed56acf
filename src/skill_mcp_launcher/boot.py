"""Boot: ruleset, capability drop, server start, then the broker loop (PID 1, as root).

1. check we are root with SETUID, SETGID and KILL; look the three users up;
2. load nftables/skill-mcp.nft and verify it is in force (needs NET_ADMIN; without it
   the fence is unavailable: instructions are served, scripts are refused, and why);
3. with SETPCAP (documented), empty the bounding set and lock the securebits (no execve as
   root is ever granted a capability again); drop every capability but SETUID,
   SETGID and KILL from the effective and permitted sets; read the kernel's view back and
   fail the boot if either drop did not take; set no-new-privileges;
4. read the owner's grant from this process's own environment, and the skills'
   declarations through the unprivileged helper (``declared``; root never parses a
   SKILL.md) - while the server boots, unless the names to hold back depend on them;
5. start the server as its uid (``oom_score_adj`` as low as the container allows; the launcher
   tries -1000 for itself at once, scripts get 1000): no capabilities, no-new-privileges, an environment built
   from the container's *without the values of the granted variables* (the launcher keeps
   those for the scripts; the server gets their names in ``SKILL_MCP_BROKER_HOLDS``), one
   end of a socketpair as fd 3 (``SKILL_MCP_BROKER_FD=3``); the server wipes its
   exec-time environment and turns non-dumpable at its own boot;
6. serve requests, reap every child, forward SIGTERM/SIGINT to the server, and exit with
   the server's status when it ends; a run in progress when the server dies ends at once.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from skill_mcp import brokerwire, confine
from skill_mcp.limits import (
    FIXED_PATH,
    LAUNCHER_OOM_SCORE_ADJ,
    SERVER_OOM_SCORE_ADJ,
    find_interpreters,
    set_oom_score_adj,
)
from skill_mcp.reasons import Refusal
from skill_mcp.sandbox_rules import MIN_LANDLOCK_ABI
from skill_mcp_launcher import caps, egress_report, fence, isolation, parse_helper, policy, procs, selftest
from skill_mcp_launcher.broker import PROXY_DIR, RUN_DIR, Broker, fatal, log

KEEP = (caps.CAP_SETUID, caps.CAP_SETGID, caps.CAP_KILL)
BROKER_FD = 3
# Variables that configure the launcher itself; the server never sees them.
LAUNCHER_ONLY = ("HOSTNAME", "HOME", "PATH")
SERVER_HOME = "/nonexistent"


def server_env(environ: Mapping[str, str], held: Sequence[str] = ()) -> dict[str, str]:
    """The server's environment: the owner's configuration, never a value the grants name.

    ``held`` are the variables the launcher keeps for scripts; the server gets the names of
    those that are set (its previews show names), so a compromise of the process that parses
    everything untrusted does not yield the owner's secrets.
    """
    env = {k: v for k, v in environ.items() if k not in LAUNCHER_ONLY and k not in held and "\0" not in v}
    env.update(
        PATH=FIXED_PATH,
        HOME=SERVER_HOME,
        SKILL_MCP_BROKER_FD=str(BROKER_FD),
        SKILL_MCP_BROKER_HOLDS=",".join(n for n in held if n in environ),
    )
    return env


def skill_roots(environ: Mapping[str, str]) -> tuple[str, ...]:
    roots = []
    for var in ("SKILLS_DIR", "MCP_SKILLS_PATH"):
        for part in environ.get(var, "").split(":"):
            if part.strip() and os.path.isdir(part):
                roots.append(os.path.realpath(part))
    return tuple(roots)


def _prepare_dirs() -> tuple[str, ...]:
    """The launcher's directories; returns the run directories an earlier life left (isolation)."""
    for path, mode in ((RUN_DIR, 0o755), (PROXY_DIR, 0o755)):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
    return isolation.prepare()


def start_server(
    command: Sequence[str], env: Mapping[str, str], account: procs.Account, child_sock: socket.socket
) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            procs.reset_signals()
            if child_sock.fileno() == BROKER_FD:
                os.set_inheritable(BROKER_FD, True)  # dup2 onto itself would keep close-on-exec
            else:
                os.dup2(child_sock.fileno(), BROKER_FD)
            procs.close_fds_from(BROKER_FD + 1)
            # Low, but never below the launcher's: a lowering beyond what this container started
            # with is refused without CAP_SYS_RESOURCE, and then the server keeps the launcher's.
            set_oom_score_adj(SERVER_OOM_SCORE_ADJ)
            procs.drop_to(account)
            caps.set_nondumpable()
            os.execve(command[0], list(command), dict(env))  # noqa: S606 - an argv array, never a shell
        except BaseException as exc:
            os.write(2, f"server start failed: {exc}\n".encode())
        os._exit(127)
    return pid


def boot_sandbox() -> tuple[bool, str]:
    """Whether this kernel can confine a run (Landlock at the minimum ABI, and seccomp): asked once.

    Without it the appliance serves every skill and runs no script (``sandbox-unavailable``):
    isolation by construction is the appliance's promise, never a best effort.
    """
    try:
        abi = confine.probe(MIN_LANDLOCK_ABI)
    except confine.SandboxUnavailable as exc:
        return False, exc.detail
    return True, f"Landlock ABI {abi} and a seccomp filter"


def boot_fence(state: caps.CapState) -> tuple[bool, str]:
    if not state.has(caps.CAP_NET_ADMIN):
        return False, "the container was started without NET_ADMIN, so the egress ruleset cannot be loaded"
    try:
        fence.load_and_verify()
    except fence.FenceError as exc:
        return False, f"the egress ruleset could not be loaded: {exc}"
    return True, "nftables default-deny egress in force; proxy on 127.0.0.1:8888"


NO_SETPCAP = (
    "started without SETPCAP: the bounding set keeps what the container was granted; "
    "no-new-privileges still stops every process here from gaining any of it"
)


def drop_capabilities(start: caps.CapState) -> caps.CapState:
    """Empty the bounding set (when SETPCAP allows), keep only ``KEEP``, verify, set NNP.

    Runs after the ruleset is loaded: ``nft`` is exec'd as root and needs ``NET_ADMIN`` in
    the bounding set. Raises ``CapError`` when the kernel's view differs from the request.
    """
    emptied = start.has(caps.CAP_SETPCAP)
    if emptied:
        caps.drop_bounding()
        caps.lock_securebits()  # needs SETPCAP too, which the next line gives up
    state = caps.set_caps(KEEP)
    if emptied and state.bounding:
        raise caps.CapError(f"the bounding set is not empty after the drop: CapBnd={state.bounding:#x}")
    caps.set_no_new_privs()
    return state


def main(argv: Sequence[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if os.getuid() != 0:
        fatal("the launcher must start as root; it drops to the server, script and proxy users itself")
    if command[:1] == ["selftest"]:
        # The same boot as production; only the server (the self-test agent) and its skill differ.
        try:
            command = selftest.prepare(command[1:])
        except selftest.SelftestError as exc:
            fatal(str(exc), 2)
    if not command or not os.path.isabs(command[0]):
        fatal("usage: launcher /absolute/server/command [args...] | selftest [--json] [--egress-probe-host NAME]", 2)
    caps.set_child_subreaper()
    # PID 1 is the OOM killer's last choice where the container lets it lower its score (scripts
    # raise theirs to the top in any case); the value in force is logged at boot.
    oom_score = set_oom_score_adj(LAUNCHER_OOM_SCORE_ADJ)
    try:
        users = procs.lookup_users()
    except (KeyError, RuntimeError) as exc:
        fatal(f"users: {exc}")
    start = caps.read_state()
    missing = [caps.NAMES[c] for c in KEEP if not start.has(c)]
    if missing:
        fatal(f"missing capabilities {missing}: the launcher cannot separate the server and scripts from root")
    fence_ok, fence_detail = boot_fence(start)
    # Bound to the ruleset's log group while CAP_NET_ADMIN is still held; it counts each run's
    # dropped direct connections after the drop (egress_report.DropLog).
    drops = egress_report.DropLog.open() if fence_ok else egress_report.DropLog(None)
    sandbox_ok, sandbox_detail = boot_sandbox()
    try:
        state = drop_capabilities(start)
    except caps.CapError as exc:
        fatal(str(exc))
    reaper = procs.Reaper()
    # Leftovers of an earlier life of this container (a restart keeps a writable layer, /dev/shm
    # and any volume): processes, files and IPC objects of the script uid, old run directories.
    cleanup = procs.Cleanup(users.script)
    cleanup.start(reaper, _prepare_dirs(), kill_timeout=2.0)
    cleanup.settle(reaper, 2.0)  # not done yet: the first run waits for it (Broker._ensure_clean)
    log(
        "boot",
        fence=fence_ok,
        detail=fence_detail,
        sandbox=sandbox_ok,
        sandbox_detail=sandbox_detail,
        caps=caps.describe(state.effective),
        cleanup=cleanup.state,
        oom_score_adj=oom_score,
        bounding=caps.describe(state.bounding),
        bounding_emptied=not state.bounding,
        **({} if not state.bounding else {"bounding_detail": NO_SETPCAP}),
    )
    environ = dict(os.environ)
    try:
        parse_user = parse_helper.parse_account()
    except (KeyError, RuntimeError) as exc:
        fatal(f"users: {exc}")
    broker = Broker(
        users=users,
        reaper=reaper,
        roots=skill_roots(environ),
        interpreters=find_interpreters(FIXED_PATH),
        fence_ok=fence_ok,
        fence_detail=fence_detail,
        sandbox_ok=sandbox_ok,
        sandbox_detail=sandbox_detail,
        grants=policy.Grants.from_environ(environ),
        environ=environ,
        parse_user=parse_user,
        cleanup=cleanup,
        drops=drops,
    )
    # With a grant (or hosted), the names to hold back are the grant's: the server starts at
    # once and the declarations are read while it boots (its first request waits on the socket).
    # Without either, the names come from the declarations, which must be read first.
    if broker.grants.source == "declaration":
        broker.read_declarations()
    known = broker.declarations.skills if broker.declarations else {}
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    server_pid = start_server(command, server_env(environ, broker.grants.held_names(known)), users.server, child)
    child.close()
    broker.reaper.watch(server_pid)
    broker.server_fd = os.pidfd_open(server_pid)  # watched during a run: see sandbox.run
    if broker.declarations is None and broker.declared_error is None:
        broker.read_declarations()
    return serve(broker, parent, server_pid)


def serve(broker: Broker, sock: socket.socket, server_pid: int) -> int:
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    broker.wake_fd = wake_r
    pending: list[int] = []
    forwarded: list[int] = []
    broker.stopping = lambda: bool(forwarded) or any(s != signal.SIGCHLD for s in pending)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: pending.append(signum))
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    connected = True
    while True:
        for key, _ in sel.select(1.0):
            if key.fd == wake_r:
                _drain(wake_r)
            elif connected and not _serve_one(broker, sock):
                # A broken or closed conversation ends: the server sees end-of-file at once
                # and refuses its runs, instead of waiting for a reply that never comes.
                sel.unregister(sock)
                sock.close()
                connected = False
        while pending:
            signum = pending.pop()
            if signum != signal.SIGCHLD:
                forwarded.append(signum)
                _signal(server_pid, signum)
        broker.reaper.reap()
        status = broker.reaper.pop(server_pid)
        if status is not None:
            # A clean-up still running is given its moment; then nothing of the uid outlives us.
            broker.script_cleanup.settle(broker.reaper, 2.0)
            procs.kill_all(broker.users.script, broker.reaper, 2.0)
            log("server-exited", status=status)
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _serve_one(broker: Broker, sock: socket.socket) -> bool:
    """Serve one frame; ``False`` ends the conversation (the server sees end-of-file).

    PID 1 outlives anything a frame can cause. A whole frame whose body is refused (not JSON,
    nested too deep, not an object) is answered ``invalid-arguments`` and the conversation goes
    on; a framing or socket error, or any other ``Exception`` from the decode or the reply,
    ends the conversation; one from ``handle`` refuses that request. Never the launcher. ``KeyboardInterrupt`` and ``SystemExit`` are not caught: the
    launcher stops through them.
    """
    message: dict[str, Any] | None
    try:
        message = brokerwire.recv(sock, first_byte_timeout=1.0, frame_timeout=10.0)
    except brokerwire.BadFrame as exc:
        # The frame was whole, only its body is refused: answer, and read the next one.
        log("bad-frame", detail=str(exc)[:200])
        message = None
        reply = {"ok": False, "reason": str(Refusal.INVALID_ARGUMENTS), "detail": str(exc)[:200], "data": {}}
    except Exception as exc:  # ProtocolError, OSError, and whatever else: the conversation ends
        log("protocol-error", detail=str(exc)[:200], error=type(exc).__name__)
        return False
    else:
        if message is None:
            return False
        try:
            reply = broker.handle(message)
        except Exception as exc:  # handle refuses what it knows; this is the last net
            log("run-failed", error=repr(exc)[:200])
            reply = {"ok": False, "reason": str(Refusal.SPAWN_FAILED), "detail": "the broker failed", "data": {}}
    reply.update(v=brokerwire.VERSION, id=message.get("id") if message is not None else None)
    try:
        brokerwire.send(sock, reply, max_frame=brokerwire.MAX_REPLY_FRAME)
    except Exception as exc:  # OSError, ProtocolError, an unencodable reply
        log("reply-failed", detail=str(exc))
        return False
    return True


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass
