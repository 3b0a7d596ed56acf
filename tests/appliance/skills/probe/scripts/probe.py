"""Appliance test probe: ``probe.py MODE ARGS...`` prints one JSON object on stdout."""

import ctypes
import errno
import json
import os
import signal
import socket
import sys
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
            "TMPDIR": os.environ.get("TMPDIR"), "env": sorted(os.environ),
            "launcher": {k: status(1)[k] for k in ("CapEff", "CapPrm", "CapBnd", "Uid")}}


def read(args):
    try:
        with open(args[0], "rb") as fh:
            data = fh.read(64)
        return {"read": "ok", "bytes": len(data)}
    except OSError as exc:
        return {"read": err(exc)}


def _ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    rc = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
    return "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def _child():
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    return pid


def ptrace(args):
    own = _child()
    out = {"target": _ptrace(int(args[0])), "own_child": _ptrace(own)}
    os.kill(own, signal.SIGKILL)
    return out


def kill(args):
    own = _child()
    out = {}
    for name, pid in (("target", int(args[0])), ("own_child", own)):
        try:
            os.kill(pid, signal.SIGTERM if name == "target" else signal.SIGKILL)
            out[name] = "ok"
        except OSError as exc:
            out[name] = err(exc)
    return out


def write(args):
    try:
        with open(args[0], "w") as fh:
            fh.write("x")
        return {"write": "ok"}
    except OSError as exc:
        return {"write": err(exc)}


def scratch(_):
    tmp = os.environ["TMPDIR"]
    left = {}
    for path in (os.path.join(tmp, "note"), "/tmp/probe-left", "/dev/shm/probe-left"):
        left[path] = write([path])["write"]
    return {"TMPDIR": tmp, "wrote": left}


def exists(args):
    return {p: os.path.lexists(p) for p in args}


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


def bomb(args):
    deadline = time.monotonic() + float(args[0])
    refused = 0
    started = 0
    while time.monotonic() < deadline:
        try:
            pid = os.fork()
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                refused += 1
                time.sleep(0.01)
                continue
            raise
        if pid == 0:
            # Every child keeps forking too: a real bomb, bounded only by NPROC.
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.05)
        started += 1
    return {"started": started, "eagain": refused}


def detach(_):
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            time.sleep(600)
            os._exit(0)
        os._exit(0)
    os.close(w)
    gpid = int(os.read(r, 32))
    os.kill(gpid, 0)
    return {"grandchild": gpid, "alive": os.path.exists(f"/proc/{gpid}"), "sid": os.getsid(gpid),
            "own_sid": os.getsid(0)}


def linger(_):
    pid = _child()
    return {"child": pid}


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


def rebind(args):
    """Listen on loopback, then ask the proxy for a name that resolves to 127.0.0.1."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(float(args[1]))
    port = srv.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(srv.accept()[0])
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    out = net(["proxy", f"http://{args[0]}:{port}/", args[1]])
    t.join()
    return {"fetch": out, "listener_reached": bool(accepted)}


def sleep(args):
    print("sleeping", flush=True)
    time.sleep(float(args[0]))
    return {"slept": float(args[0])}


def silent(args):
    # No output at all while it runs: nothing but a signal can wake the launcher's capture loop.
    time.sleep(float(args[0]))
    return {"slept": float(args[0])}


def net(args):
    mode, target = args[0], args[1]
    try:
        if mode == "proxy":
            try:
                with urllib.request.urlopen(target, timeout=float(args[2]) if len(args) > 2 else 15) as resp:
                    return {"status": resp.status}
            except urllib.error.HTTPError as exc:
                return {"status": exc.code}
        if mode == "direct":
            host, port = target.rsplit(":", 1)
            socket.create_connection((host, int(port)), timeout=3).close()
            return {"direct": "connected"}
        if mode == "dns":
            socket.getaddrinfo(target, 80)
            return {"dns": "resolved"}
        if mode == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(2)
            s.sendto(b"\x00", (target, 53))
            s.recv(512)
            return {"udp": "answered"}
    except (OSError, ValueError) as exc:
        return {"error": type(exc).__name__, "errno": err(exc), "detail": str(exc)[:300]}
    return {"error": "unknown mode"}


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
    for top in (tmp, "/tmp"):  # a directory its owner locked itself out of
        locked = os.path.join(top, f"locked-{tag}")
        os.makedirs(os.path.join(locked, "inner"), exist_ok=True)
        write([os.path.join(locked, "inner", "secret")])
        os.chmod(os.path.join(locked, "inner"), 0)
        os.chmod(locked, 0)
        out["wrote"][locked] = "ok"
    libc = _libc()
    mq = libc.mq_open(f"/plant-{tag}".encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
    out["mq"] = "ok" if mq >= 0 and os.path.exists(f"/dev/mqueue/plant-{tag}") else err(OSError(ctypes.get_errno(), ""))
    keys = _keys(tag)
    out["ipc"] = {"shm": libc.shmget(keys["shm"], 4096, IPC_CREAT | 0o666),
                  "msg": libc.msgget(keys["msg"], IPC_CREAT | 0o666),
                  "sem": libc.semget(keys["sem"], 1, IPC_CREAT | 0o666)}
    out["given_away"] = _give_away(libc, "msg", out["ipc"]["msg"], 10001)
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
    found, stack = [], [top]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.path == skip:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid:
                found.append(entry.path)
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return found


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
    return {"TMPDIR": tmp, "scratch_empty": os.listdir(tmp) == [], "found": sorted(set(found))}


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
    """The SHA-256 of a variable's value: proves the value arrived without printing it."""
    import hashlib

    value = os.environ.get(args[0])
    return {"present": value is not None,
            "sha256": hashlib.sha256(value.encode()).hexdigest() if value is not None else None}


MODES = {"id": ident, "envhash": envhash, "read": read, "ptrace": ptrace, "kill": kill, "write": write, "scratch": scratch,
         "exists": exists, "flood": flood, "bomb": bomb, "detach": detach, "linger": linger, "net": net,
         "procs": procs, "server": server, "ipc": ipc, "rebind": rebind,
         "sleep": sleep, "silent": silent, "plant": plant, "seek": seek, "fill": fill, "writable": writable,
         "keyring": keyring}

if __name__ == "__main__":
    result = MODES[sys.argv[1]](sys.argv[2:])
    sys.stdout.write(json.dumps(result) + "\n")
