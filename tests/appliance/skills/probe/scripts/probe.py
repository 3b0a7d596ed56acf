"""The test probe of the appliance and security suites: ``probe.py MODE ARGS...`` prints one JSON
object as its last stdout line.

Each mode is one hostile (or ordinary) thing a script might do; the tests read the JSON and
assert what the fence let it see or do. The security suite runs it under the standalone server
(``tests/security/conftest.py`` copies it into a tree of traps) and in the appliance; the
appliance suite runs it under the broker. Standard library only: it runs on the image's Python.

It is the tests' own eye, so it shares no code with what it checks (the launcher's cleanup,
the self-test's probe): where the two look alike, the probe walks and asks in its own way.
"""

import contextlib
import ctypes
import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def err(exc):
    return errno.errorcode.get(getattr(exc, "errno", None) or 0, type(exc).__name__)


def status(pid="self"):
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def ident(_):
    st = status()
    return {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
            "CapEff": st["CapEff"], "CapPrm": st["CapPrm"], "CapInh": st["CapInh"], "CapAmb": st["CapAmb"],
            "CapBnd": st["CapBnd"], "NoNewPrivs": st["NoNewPrivs"], "cwd": os.getcwd(),
            "pid": os.getpid(), "ppid": os.getppid(), "fds": open_fds(),
            "core": resource.getrlimit(resource.RLIMIT_CORE), "TMPDIR": os.environ.get("TMPDIR"),
            "env": sorted(os.environ), "launcher": _pid1()}


def _pid1():
    """PID 1's capabilities and uid: in the appliance, the launcher's."""
    try:
        st = status(1)
    except OSError as exc:
        return {"error": err(exc)}
    return {k: st[k] for k in ("CapEff", "CapPrm", "CapBnd", "Uid")}


def open_fds():
    """Each open descriptor and what it points at (the listing's own descriptor left out)."""
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the descriptor of this very listing, already closed
        out[int(fd)] = target
    return out


def env(_):
    return {"env": dict(os.environ)}


def read(args):
    try:
        with open(args[0], "rb") as fh:
            data = fh.read(4096)
        return {"read": "ok", "bytes": len(data), "text": data.decode(errors="replace")}
    except OSError as exc:
        return {"read": err(exc)}


def listdir(args):
    try:
        return {"list": "ok", "entries": sorted(os.listdir(args[0]))}
    except OSError as exc:
        return {"list": err(exc)}


def write(args):
    try:
        with open(args[0], "w") as fh:
            fh.write("x")
        return {"write": "ok"}
    except OSError as exc:
        return {"write": err(exc)}


def exists(args):
    return {p: os.path.lexists(p) for p in args}


def scratch(_):
    tmp = os.environ["TMPDIR"]
    left = {}
    for path in (os.path.join(tmp, "note"), "/tmp/probe-left", "/dev/shm/probe-left"):
        left[path] = write([path])["write"]
    return {"TMPDIR": tmp, "wrote": left}


def _ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    rc = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
    return "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def _sleeper():
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    return pid


def ptrace(args):
    own = _sleeper()
    out = {"target": _ptrace(int(args[0])), "own_child": _ptrace(own)}
    os.kill(own, signal.SIGKILL)
    os.waitpid(own, 0)
    return out


def kill(args):
    own = _sleeper()
    out = {}
    for name, pid, sig in (("target", int(args[0]), signal.SIGTERM), ("target0", int(args[0]), 0),
                           ("own_child", own, signal.SIGKILL)):
        try:
            os.kill(pid, sig)
            out[name] = "ok"
        except OSError as exc:
            out[name] = err(exc)
    os.waitpid(own, 0)
    return out


def cmdlines(args):
    """Every process's command line we can read; does the (hex-given) secret appear in any?"""
    seen, hits = 0, []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        seen += 1
        if bytes.fromhex(args[0]) in data:
            hits.append(int(p))
    return {"seen": seen, "hits": hits}


def procs(_):
    return {"uids": sorted({int(status(p)["Uid"].split()[0]) for p in os.listdir("/proc") if p.isdigit()
                            and os.path.exists(f"/proc/{p}")})}


def server(_):
    """The server uid's processes as a script sees them, and what it can read of them."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            st = status(p)
        except OSError:
            continue
        if int(st["Uid"].split()[0]) == 10001:
            found.append({"pid": int(p), "CapEff": st["CapEff"], "CapPrm": st["CapPrm"],
                          "NoNewPrivs": st["NoNewPrivs"], "environ": read([f"/proc/{p}/environ"])["read"],
                          "environ_owner": os.stat(f"/proc/{p}/environ").st_uid})
    return {"server": found}


def ipc(args):
    """``ipc create``: make a shared memory segment and a message queue; ``ipc list``: ours."""
    mine = []
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as fh:
            header = fh.readline().split()
            for line in fh:
                cols = line.split()
                if int(cols[header.index("uid")]) == os.getuid():
                    mine.append([kind, int(cols[1])])
    if args[0] == "create":
        libc = ctypes.CDLL(None, use_errno=True)
        shm = libc.shmget(0, 4096, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        msg = libc.msgget(0, 0o1000 | 0o600)
        return {"shm": shm, "msg": msg, "before": mine}
    return {"mine": mine}


def setuid_exec(args):
    try:
        proc = subprocess.run([args[0], "-u"], capture_output=True, timeout=10, check=False)
    except OSError as exc:
        return {"euid_after_exec": None, "exec": err(exc)}
    return {"euid_after_exec": proc.stdout.decode().strip(), "rc": proc.returncode}


def abort(_):
    """A child that dumps core if it can: where would a core go, and did one appear?"""
    pid = os.fork()
    if pid == 0:
        os.abort()
    _, st = os.waitpid(pid, 0)
    return {"signal": os.WTERMSIG(st), "core_dumped": os.WCOREDUMP(st),
            "core_files": [f for f in os.listdir(".") + os.listdir(os.environ.get("TMPDIR", "/tmp"))
                           if f.startswith("core")]}


def sleep(args):
    print("sleeping", flush=True)
    time.sleep(float(args[0]))
    return {"slept": float(args[0])}


def silent(args):
    # No output at all while it runs: nothing but a signal can wake the launcher's capture loop.
    time.sleep(float(args[0]))
    return {"slept": float(args[0])}


def _announce(info):
    """Say that the run has started, in the run's own directory: its sandbox lets it write nowhere
    else. The test finds this process by the marker in its arguments (args[0]) and reads the file
    there (``tests.security.harness.announced``)."""
    path = os.path.join(os.environ["TMPDIR"], "announce.json")
    with open(path + ".tmp", "w") as fh:
        fh.write(json.dumps(info))
    os.rename(path + ".tmp", path)


def pidfile(args):
    """Announce our pid (args[0] is the test's marker), then sleep args[1] seconds (the test kills
    the server meanwhile)."""
    _announce({"pid": os.getpid(), "ppid": os.getppid()})
    time.sleep(float(args[1]))
    return {"slept": True}


def leave(args):
    """Leave a secret in this run's TMPDIR, then like ``pidfile`` (the test kills the server meanwhile)."""
    with open(os.path.join(os.environ["TMPDIR"], "secret"), "w") as fh:
        fh.write(args[2])
    _announce({"pid": os.getpid(), "ppid": os.getppid(), "TMPDIR": os.environ["TMPDIR"]})
    time.sleep(float(args[1]))
    return {"slept": True}


def rundirs(args):
    """The run directories beside this run's own (when it may list them: the sandbox refuses), and
    whether an earlier run's secret is readable there or in the directories named in ARGS."""
    tmp = os.environ["TMPDIR"]
    parent = os.path.dirname(tmp)
    try:
        seen = sorted(os.path.join(parent, n) for n in os.listdir(parent) if n.startswith("skill-mcp-run-"))
        listed = "ok"
    except OSError as exc:
        seen, listed = [], err(exc)
    secrets_read = []
    for path in [*seen, *args]:
        try:
            with open(os.path.join(path, "secret")) as fh:
                secrets_read.append(fh.read())
        except OSError:
            pass
    return {"TMPDIR": tmp, "seen": seen, "listed": listed, "secrets": secrets_read}


def linger(_):
    """A child left running in our own process group, holding the run's pipes."""
    return {"child": _sleeper()}


def background(_):
    """A child left running in our own process group, holding no pipe."""
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        time.sleep(120)
        os._exit(0)
    return {"child": pid}


def doublefork(args):
    """The classic daemon escape: fork, setsid, fork; the grandchild keeps stdout open if asked."""
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            if not args or args[0] != "hold":
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(120)
            os._exit(0)
        os._exit(0)
    os.close(w)
    gpid = int(os.read(r, 32))
    return {"grandchild": gpid, "alive": os.path.exists(f"/proc/{gpid}"), "sid": os.getsid(gpid),
            "own_sid": os.getsid(0)}


def setsid_daemon(_):
    """A single fork into a new session (no double fork), stdio to /dev/null."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.write(w, str(os.getpid()).encode())
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        time.sleep(120)
        os._exit(0)
    os.close(w)
    return {"daemon": int(os.read(r, 32))}


def forkbomb(args):
    deadline = time.monotonic() + float(args[0])
    started = eagain = 0
    while time.monotonic() < deadline:
        try:
            pid = os.fork()
        except OSError as exc:
            if exc.errno != errno.EAGAIN:
                raise
            eagain += 1
            time.sleep(0.01)
            continue
        if pid == 0:
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.05)
        started += 1
    return {"started": started, "eagain": eagain}


def threadbomb(args):
    stop = threading.Event()
    started, error = 0, None
    for _ in range(int(args[0])):
        try:
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
        except RuntimeError as exc:
            error = str(exc)[:200]
            break
    stop.set()
    return {"started": started, "error": error}


def zombie(_):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return {"zombie": pid}  # never reaped by us


def flood(args):
    block = b"x" * 65536
    total = int(args[0])
    for stream in (sys.stdout.buffer, sys.stderr.buffer):
        sent = 0
        while sent < total:
            stream.write(block[: total - sent])
            sent += min(len(block), total - sent)
        stream.flush()
    return {"flooded": total}


def weird(_):
    out = sys.stdout.buffer
    out.write(b"\x1b[31mred\x1b[0m\x00nul\xff\xfeinvalid\r\x07")
    out.write(b'\n{"weird": true}\nno-newline-at-end')
    out.flush()
    os._exit(0)


def ignore_term(_):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring", flush=True)
    time.sleep(120)
    return {}


def selfstop(_):
    print("stopping", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
    return {"resumed": True}


def spin(_):
    while True:
        pass


def balloon(args):
    chunks = []
    try:
        for _ in range(int(args[0])):
            chunks.append(bytearray(16 * 1024 * 1024))
        return {"balloon": "allocated", "mib": 16 * len(chunks)}
    except MemoryError:
        return {"balloon": "MemoryError", "mib": 16 * len(chunks)}


def diskfill(args):
    path = os.path.join(os.environ["TMPDIR"], "fill")
    block = b"\0" * (1 << 20)
    written = 0
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # see EFBIG instead of dying silently
    try:
        with open(path, "wb") as fh:
            for _ in range(int(args[0])):
                fh.write(block)
                fh.flush()
                written += 1
        return {"fill": "ok", "mib": written, "tmp": os.environ["TMPDIR"]}
    except OSError as exc:
        return {"fill": err(exc), "mib": written, "tmp": os.environ["TMPDIR"]}


def fds(_):
    held = []
    try:
        while len(held) < 100000:
            held.append(os.open(os.devnull, os.O_RDONLY))
        return {"fds": "unbounded", "opened": len(held)}
    except OSError as exc:
        return {"fds": err(exc), "opened": len(held), "limit": resource.getrlimit(resource.RLIMIT_NOFILE)}


def net(args):
    mode, target = args[0], args[1]
    try:
        if mode == "proxy":
            try:
                with urllib.request.urlopen(target, timeout=float(args[2]) if len(args) > 2 else 15) as resp:
                    return {"status": resp.status}
            except urllib.error.HTTPError as exc:
                return {"status": exc.code}
        if mode == "noproxy":  # a script that ignores the proxy variables
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(target, timeout=3) as resp:
                return {"status": resp.status}
        if mode == "direct":
            host, port = target.rsplit(":", 1)
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(3)
                s.connect((host.strip("[]"), int(port)))
            return {"direct": "connected"}
        if mode == "dns":
            socket.getaddrinfo(target, 80)
            return {"dns": "resolved"}
        if mode == "udp":
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(2)
                s.sendto(b"\x00", (target, 53))
                s.recv(512)
            return {"udp": "answered"}
        if mode == "raw":
            socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
            return {"raw": "opened"}
        if mode == "connect":  # a raw CONNECT through the proxy to host:port
            host, port = target.rsplit(":", 1)
            proxy = os.environ["HTTP_PROXY"].rsplit(":", 1)
            with socket.create_connection((proxy[0].split("//")[1], int(proxy[1])), timeout=10) as s:
                s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
                line = s.recv(200).split(b"\r\n", 1)[0].decode(errors="replace")
            return {"connect": line}
    except (OSError, ValueError) as exc:
        return {"error": type(exc).__name__, "errno": err(exc), "detail": str(exc)[:300]}
    return {"error": "unknown mode"}


def rebind(args):
    """``rebind NAME PORT [TIMEOUT]``: listen on 127.0.0.1:PORT (0: any free port), then fetch
    http://NAME:PORT/ through the proxy, NAME resolving to loopback: did the proxy reach our listener?"""
    name, timeout = args[0], float(args[2]) if len(args) > 2 else 15
    hits = []
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("127.0.0.1", int(args[1])))
    except OSError as exc:  # the run's sandbox refuses every TCP bind: fetch a port nothing of ours holds
        srv.close()
        return {"listen": err(exc), "fetch": net(["proxy", f"http://{name}:{int(args[1]) or 80}/", str(timeout)]),
                "listener_hits": 0}
    srv.listen(4)
    srv.settimeout(timeout + 5)
    port = srv.getsockname()[1]

    def serve():
        try:
            conn, _ = srv.accept()
            hits.append(conn.recv(200).decode(errors="replace"))
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\nloopbak")
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    out = net(["proxy", f"http://{name}:{port}/", str(timeout)])
    srv.close()
    thread.join(1)
    return {"listen": "ok", "fetch": out, "listener_hits": len(hits)}


def cmd(args):
    """Run a program (no shell) and report how it ended."""
    try:
        proc = subprocess.run(args, capture_output=True, timeout=20, check=False)
    except OSError as exc:
        return {"rc": None, "error": err(exc)}
    return {"rc": proc.returncode, "stdout": proc.stdout.decode(errors="replace")[-2000:],
            "stderr": proc.stderr.decode(errors="replace")[-2000:]}


def echo(args):
    return {"argv": args}


def _sibling_shim(deadline):
    """A process of our server (our parent) running the exec shim: the one waiting for the next run."""
    while time.monotonic() < deadline:
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == os.getpid():
                continue
            try:
                with open(f"/proc/{p}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{p}/cmdline", "rb") as fh:
                    argv = fh.read()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == os.getppid() and b"_exec_shim.py" in argv:
                return int(p)
        time.sleep(0.02)
    return None


def shim(args):
    """Reach for the shim the server keeps waiting for its next run: attach, signal, read it.

    Announces our pid first (args[0] is the test's marker): the test then makes the server start
    that shim (a preview).
    """
    _announce({"pid": os.getpid(), "ppid": os.getppid()})
    pid = _sibling_shim(time.monotonic() + 20)
    if pid is None:
        return {"found": None}
    out = {"found": pid, "ptrace": _ptrace(pid), **read([f"/proc/{pid}/environ"])}
    for name, sig in (("kill", signal.SIGKILL), ("kill0", 0)):
        try:
            os.kill(pid, sig)
            out[name] = "ok"
        except OSError as exc:
            out[name] = err(exc)
    own = _sleeper()
    out["own_child"] = _ptrace(own)
    os.kill(own, signal.SIGKILL)
    os.waitpid(own, 0)
    return out


# --- runs share nothing: ``plant`` leaves something everywhere it can, ``seek`` looks for it ---

SCRATCH_ROOT = "/run/skill-mcp/scratch"
SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run")
IPC_CREAT, IPC_EXCL, IPC_STAT, IPC_SET = 0o1000, 0o2000, 2, 1


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _keys(tag):
    base = 0x5EED0000 + int(tag) * 4
    return {"shm": base, "msg": base + 1, "sem": base + 2}


def _give_away(libc, kind, ident, uid):
    """IPC_SET the object's owner to another uid (its creator stays ours)."""
    buf = ctypes.create_string_buffer(512)
    call = libc.shmctl if kind == "shm" else libc.msgctl
    if call(ident, IPC_STAT, buf) != 0:
        return err(OSError(ctypes.get_errno(), ""))
    ctypes.c_uint32.from_buffer(buf, 4).value = uid  # struct ipc_perm: key, then uid
    return "ok" if call(ident, IPC_SET, buf) == 0 else err(OSError(ctypes.get_errno(), ""))


def plant(args):
    """Leave files, a message queue and System V objects behind; try to squat future run names."""
    tag, hold = args[0], float(args[1]) if len(args) > 1 else 0
    tmp = os.environ["TMPDIR"]
    out = {"TMPDIR": tmp, "wrote": {}}
    for path in (os.path.join(tmp, "note"), f"/tmp/plant-{tag}", f"/dev/shm/plant-{tag}", f"/var/tmp/plant-{tag}",
                 f"/run/plant-{tag}"):
        out["wrote"][path] = write([path])["write"]
    for top in (tmp, "/tmp"):  # a directory its owner locked itself out of (the sandbox refuses /tmp)
        locked = os.path.join(top, f"locked-{tag}")
        try:
            os.makedirs(os.path.join(locked, "inner"), exist_ok=True)
        except OSError as exc:
            out["wrote"][locked] = err(exc)
            continue
        write([os.path.join(locked, "inner", "secret")])
        os.chmod(os.path.join(locked, "inner"), 0)
        os.chmod(locked, 0)
        out["wrote"][locked] = "ok"
    libc = _libc()
    mq = libc.mq_open(f"/plant-{tag}".encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
    out["mq"] = "ok" if mq >= 0 and os.path.exists(f"/dev/mqueue/plant-{tag}") else err(OSError(ctypes.get_errno(), ""))
    keys = _keys(tag)
    made = {"shm": libc.shmget(keys["shm"], 4096, IPC_CREAT | 0o666)}
    made["shm_errno"] = ctypes.get_errno() if made["shm"] < 0 else 0
    made["msg"] = libc.msgget(keys["msg"], IPC_CREAT | 0o666)
    made["sem"] = libc.semget(keys["sem"], 1, IPC_CREAT | 0o666)
    out["ipc"] = {k: v for k, v in made.items() if k != "shm_errno"}
    out["ipc_errno"] = errno.errorcode.get(made["shm_errno"], "") if made["shm_errno"] else "ok"
    out["given_away"] = (_give_away(libc, "msg", out["ipc"]["msg"], 10001) if out["ipc"]["msg"] >= 0
                         else "not made")
    out["squat"] = {}
    for name in ("run-1", f"run-{int(tag) + 1}", f"run-{int(tag) + 2}", "run-" + "0" * 32):
        try:
            os.mkdir(os.path.join(SCRATCH_ROOT, name))
            out["squat"][name] = "ok"
        except OSError as exc:
            out["squat"][name] = err(exc)
    try:
        out["list_scratch_root"] = sorted(os.listdir(SCRATCH_ROOT))
    except OSError as exc:
        out["list_scratch_root"] = err(exc)
    if hold:
        print(json.dumps(out), flush=True)
        time.sleep(hold)
    return out


def _owned_below(top, uid, skip):
    """Every path below ``top`` that ``uid`` owns (links not followed), ``skip`` and its contents left out."""
    found = []
    for root, dirs, files in os.walk(top, onerror=lambda _exc: None):
        dirs[:] = [d for d in dirs if os.path.join(root, d) != skip]
        for name in (*dirs, *files):
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                if os.lstat(path).st_uid == uid:
                    found.append(path)
    return found


def _left(tmp):
    """What is in a run directory besides the run's own empty output directory (SKILL_OUTPUT_DIR)."""
    out = os.environ.get("SKILL_OUTPUT_DIR", "")
    entries = sorted(os.listdir(tmp))
    if out and os.path.dirname(out) == tmp and os.path.basename(out) in entries and not os.listdir(out):
        entries.remove(os.path.basename(out))
    return entries


def seek(args):
    """Everything of this uid's that is not this run's own, and the earlier run's objects by name."""
    uid, tmp = os.getuid(), os.environ["TMPDIR"]
    found = [p for top in SHARED for p in _owned_below(top, uid, tmp)]
    libc = _libc()
    for tag in args:
        keys = _keys(tag)
        for kind, key in keys.items():
            ident = (libc.shmget(key, 0, 0) if kind == "shm" else libc.msgget(key, 0) if kind == "msg"
                     else libc.semget(key, 0, 0))
            if ident >= 0:
                found.append(f"sysv-{kind}:{key:#x}")
        if libc.mq_open(f"/plant-{tag}".encode(), os.O_RDONLY, 0, None) >= 0:
            found.append(f"mqueue:/plant-{tag}")
        for path in (f"/tmp/plant-{tag}", f"/dev/shm/plant-{tag}", f"/tmp/locked-{tag}"):
            if os.path.lexists(path):
                found.append(path)
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as fh:
            header = fh.readline().split()
            for line in fh:
                cols = line.split()
                if uid in (int(cols[header.index("uid")]), int(cols[header.index("cuid")])):
                    found.append(f"sysv-{kind}#{cols[1]}")
    return {"TMPDIR": tmp, "scratch_empty": _left(tmp) == [], "found": sorted(set(found))}


def fill(args):
    """Write until every shared place it can write is full (ENOSPC), then leave it so."""
    out = {}
    block = b"\0" * (1 << 20)
    for top in (os.environ["TMPDIR"], "/tmp", "/dev/shm"):
        written, n = 0, 0
        try:
            while True:
                with open(os.path.join(top, f"fill-{n}"), "wb") as fh:
                    for _ in range(16):
                        fh.write(block)
                        written += 1
                n += 1
        except OSError as exc:
            out[top] = {"mib": written, "stopped": err(exc)}
    return out


def keyring(_):
    """add_key into the user keyring, which would outlive this run's processes; getpid as a control."""
    libc = _libc()
    added = libc.syscall(248, b"user", b"probe", b"left", 4, ctypes.c_int(-4))  # add_key, KEY_SPEC_USER_KEYRING
    out = {"add_key": "ok" if added >= 0 else err(OSError(ctypes.get_errno(), ""))}
    out["getpid"] = "ok" if libc.syscall(39) == os.getpid() else "mismatch"
    return out


def writable(_):
    """Every directory and regular file this uid may write, outside /proc and /sys (its own scratch
    directory, which no listing leads to, is walked by name)."""
    found = []
    walks = (os.walk("/"), os.walk(os.environ["TMPDIR"]))
    for root, dirs, files in (step for walk in walks for step in walk):
        if root in ("/proc", "/sys"):
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys")]
        if os.access(root, os.W_OK):
            found.append(root)
        for name in files:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path) and os.access(path, os.W_OK):
                found.append(path)
    return {"TMPDIR": os.environ["TMPDIR"], "writable": found}


def envhash(args):
    """The SHA-256 of one variable's value: proves it arrived without the value passing the server."""
    import hashlib

    value = os.environ.get(args[0])
    return {"present": value is not None,
            "sha256": hashlib.sha256(value.encode()).hexdigest() if value is not None else None}


def _deep_tree(top, levels=1100):
    """A chain of ``levels`` directories under ``top`` (made by descriptor: its path is longer
    than PATH_MAX), a file every hundred levels, the deepest level locked; "ok" or why not."""
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return err(exc)
    try:
        name = f"deep-{os.getpid()}"
        for i in range(levels):
            os.mkdir(name, dir_fd=fd)
            new = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, name = new, "d"
            if i % 100 == 0:
                os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        os.fchmod(fd, 0)
        return "ok"
    except OSError as exc:
        return err(exc)
    finally:
        os.close(fd)


def _cache_key(path):
    """What a skill might do with its granted key: cache it in a file only its uid may read."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(os.environ.get("PROBE_TOKEN", "no-token"))
        return "ok"
    except OSError as exc:
        return err(exc)


def deep(args):
    """``deep``: a 1,100-level tree in TMPDIR, /tmp and /dev/shm, and the granted key cached in
    each of those places (writes a sandbox refuses are reported, not fatal)."""
    tmp = os.environ["TMPDIR"]
    out = {"TMPDIR": tmp, "deep": {}, "cached": {}}
    for top in (tmp, "/tmp", "/dev/shm"):
        out["cached"][top] = _cache_key(os.path.join(top, "key-cache"))
        out["deep"][top] = _deep_tree(top)
    return out


def deepfill(args):
    """``deepfill MIB``: MIB MiB of data in TMPDIR, with a 1,100-level tree beside it."""
    tmp, mib = os.environ["TMPDIR"], int(args[0])
    block = b"\1" * (1 << 20)
    written = 0
    try:
        with open(os.path.join(tmp, "ballast"), "wb") as fh:
            for _ in range(mib):
                fh.write(block)
                written += 1
    except OSError as exc:
        return {"TMPDIR": tmp, "mib": written, "stopped": err(exc)}
    return {"TMPDIR": tmp, "mib": written, "deep": _deep_tree(tmp)}


def manyfiles(args):
    """``manyfiles N``: N empty files in TMPDIR (in directories of 10,000)."""
    tmp, n = os.environ["TMPDIR"], int(args[0])
    made = 0
    try:
        for start in range(0, n, 10000):
            sub = os.path.join(tmp, f"many-{start}")
            os.mkdir(sub)
            dfd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY)
            try:
                for i in range(start, min(n, start + 10000)):
                    os.close(os.open(str(i), os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=dfd))
                    made += 1
            finally:
                os.close(dfd)
    except OSError as exc:
        return {"TMPDIR": tmp, "made": made, "stopped": err(exc)}
    return {"TMPDIR": tmp, "made": made}


def census(args):
    """What a run finds of earlier runs: each path in ``args`` read (its bytes, or why not), the
    other processes of this uid, its TMPDIR's entries and the free space there."""
    uid, tmp = os.getuid(), os.environ["TMPDIR"]
    found = {}
    for path in args:
        try:
            with open(path, "rb") as fh:
                found[path] = fh.read(256).decode(errors="replace")
        except OSError as exc:
            found[path] = err(exc)
    others = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            with contextlib.suppress(OSError, KeyError):
                if int(status(entry)["Uid"].split()[0]) == uid:
                    with open(f"/proc/{entry}/cmdline", "rb") as fh:
                        cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")[:200]
                    others.append({"pid": int(entry), "cmdline": cmdline})
    st = os.statvfs(tmp)
    return {"TMPDIR": tmp, "read": found, "others": others, "entries": _left(tmp),
            "free_mib": st.f_bavail * st.f_frsize // (1 << 20)}


def memhog(args):
    """``memhog N MB HOLD``: N children, each touching MB MB and holding it HOLD seconds; how each ended."""
    n, mb, hold = int(args[0]), int(args[1]), float(args[2])
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                ballast = b"\1" * (mb << 20)  # written, so every page is really there
                time.sleep(hold)
                os._exit(0 if ballast else 1)
            except BaseException:
                os._exit(3)
        pids.append(pid)
    ends = {"exited": 0, "killed": 0}
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        ends["killed" if os.WIFSIGNALED(st) else "exited"] += 1
    return {"children": n, "ends": ends}


PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f0005000201b5b5b0f30000000049454e44ae426082")


def outputs(args):
    """Leave results in SKILL_OUTPUT_DIR beside what must never come back: links to /proc/1 and to
    the launcher's own directories, a FIFO, an undecodable name, a 4 KB path; ``many N`` leaves N."""
    out = os.environ["SKILL_OUTPUT_DIR"]
    if args[:1] == ["many"]:
        for i in range(int(args[1])):
            with open(os.path.join(out, f"f{i:05d}.txt"), "w") as fh:
                fh.write(str(i))
        return {"wrote": int(args[1])}
    with open(os.path.join(out, "report.md"), "w") as fh:
        fh.write("# report\n")
    with open(os.path.join(out, "pixel.png"), "wb") as fh:
        fh.write(PIXEL)
    os.makedirs(os.path.join(out, "sub"))
    with open(os.path.join(out, "sub", "nested.csv"), "w") as fh:
        fh.write("a,b\n1,2\n")
    os.symlink("/proc/1/environ", os.path.join(out, "environ"))
    os.symlink("/run/skill-mcp", os.path.join(out, "launcher"))
    os.symlink(os.path.dirname(os.environ["TMPDIR"]), os.path.join(out, "runs"))
    os.mkfifo(os.path.join(out, "pipe"))
    with open(os.path.join(os.fsencode(out), b"odd\xff\xfe.txt"), "w") as fh:
        fh.write("odd")
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(40):
        os.mkdir("d" * 100, dir_fd=fd)
        nxt = os.open("d" * 100, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    leaf = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
    os.write(leaf, b"deep")
    os.close(leaf)
    os.close(fd)
    return {"wrote": out}


def egress(args):
    """One run that reaches a granted host, asks for an undeclared and a declared-but-ungranted
    one, and tries a direct connection: the result's egress report must name exactly that."""
    got = {}
    for url in ("http://allowed.test/", "http://other.test/", "http://declared-not-granted.example/"):
        got[url] = net(["proxy", url, "10"])
    # The sandbox refuses TCP to any port but the proxy's before a packet leaves; the proxy's port
    # at another address, and UDP, reach the ruleset, which drops (and counts) them.
    host = args[0].rsplit(":", 1)[0]
    got["direct"] = net(["direct", f"{host}:8888", "3"])
    got["udp"] = net(["udp", host])
    return got


MODES = {"id": ident, "env": env, "envhash": envhash, "read": read, "list": listdir, "write": write,
         "exists": exists, "scratch": scratch, "ptrace": ptrace, "kill": kill, "cmdlines": cmdlines,
         "procs": procs, "server": server, "ipc": ipc, "setuid": setuid_exec, "abort": abort, "sleep": sleep,
         "silent": silent, "pidfile": pidfile, "leave": leave, "rundirs": rundirs, "linger": linger,
         "background": background, "doublefork": doublefork, "setsid": setsid_daemon, "forkbomb": forkbomb,
         "threadbomb": threadbomb, "zombie": zombie, "flood": flood, "weird": weird, "ignore_term": ignore_term,
         "selfstop": selfstop, "spin": spin, "balloon": balloon, "diskfill": diskfill, "fds": fds, "net": net,
         "echo": echo, "rebind": rebind, "cmd": cmd, "shim": shim, "plant": plant, "seek": seek, "fill": fill,
         "writable": writable, "keyring": keyring, "deep": deep, "deepfill": deepfill, "manyfiles": manyfiles,
         "census": census, "memhog": memhog, "outputs": outputs, "egress": egress}

if __name__ == "__main__":
    result = MODES[sys.argv[1]](sys.argv[2:])
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
