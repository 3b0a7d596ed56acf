"""The self-test's probe: ``probe.py MODE ARGS...`` prints one JSON object on stdout.

It runs as a real script run (the script uid, under the broker) and reports what it could
and could not do; the verdicts are drawn by the self-test's agent, not here. It never prints
the canary secret it was handed, only its SHA-256, so the value cannot reach the server
through this run's output. Standard library only: it runs on the image's system Python.
"""

import contextlib
import ctypes
import errno
import functools
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

CANARY_VAR = "SKILL_MCP_SELFTEST_SECRET"
NFT = "/usr/sbin/nft"
CONNECT_S = 2.0
FORK_BOUND = 2048  # far above the appliance's RLIMIT_NPROC (64); reaching it means no limit
PR_CAPBSET_READ = 23
PR_GET_NO_NEW_PRIVS = 39
IPC_CREAT = 0o1000
IPC_RMID = 0


def err(exc: BaseException) -> str:
    code = getattr(exc, "errno", None)
    return errno.errorcode.get(code, type(exc).__name__) if code else type(exc).__name__


def status(pid: str = "self") -> dict[str, str]:
    out: dict[str, str] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _bounding_from_prctl() -> list[int]:
    """Capabilities the kernel still reports in the bounding set, asked one by one."""
    libc = _libc()
    held: list[int] = []
    for cap in range(64):
        rc = libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0)
        if rc < 0:
            break
        if rc == 1:
            held.append(cap)
    return held


def _try(fn: Callable[[], object]) -> str:
    try:
        fn()
        return "ok"
    except OSError as exc:
        return err(exc)


def _nft(*args: str) -> dict[str, Any]:
    try:
        proc = subprocess.run([NFT, *args], capture_output=True, timeout=10, check=False, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": None, "error": err(exc)}
    return {"rc": proc.returncode, "stderr": proc.stderr.decode(errors="replace")[-300:]}


def _write_attempts(dirs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for directory in dirs:
        path = os.path.join(directory, f".selftest-write-{os.getpid()}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            out[directory] = err(exc)
            continue
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)  # the attempt is the evidence; leave the operator's tree as it was
        out[directory] = "ok"
    return out


def _skill_dirs(roots: list[str], limit: int = 20) -> list[str]:
    """The roots and the skill directories directly below them (bounded)."""
    found: list[str] = []
    for root in roots:
        found.append(root)
        with contextlib.suppress(OSError):
            for entry in sorted(os.listdir(root))[:limit]:
                path = os.path.join(root, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    found.append(path)
    return found


def posture(args: list[str]) -> dict[str, Any]:
    """Identity, capabilities, no-new-privileges, the ruleset and the skills, as this uid sees them."""
    st = status()
    secret = os.environ.get(CANARY_VAR)
    roots = [a for a in args if a]
    own_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return {
        "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
        "caps": {k: st[k] for k in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd")},
        "bounding_prctl": _bounding_from_prctl(),
        "no_new_privs": _libc().prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
        "setuid_root": _try(lambda: os.setuid(0)),
        "chown_root": _try(lambda: os.chown(sys.argv[0], os.getuid(), 0)),
        "nft_flush": _nft("flush", "ruleset"),
        "nft_add": _nft("add", "table", "inet", "selftest_tamper"),
        "secret_sha256": hashlib.sha256(secret.encode()).hexdigest() if secret is not None else None,
        "skills_write": _write_attempts([own_dir, *_skill_dirs(roots)]),
    }


def _connect(host: str, port: int) -> dict[str, Any]:
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=CONNECT_S):
            return {"result": "connected", "s": round(time.monotonic() - started, 2)}
    except OSError as exc:
        return {"result": err(exc), "s": round(time.monotonic() - started, 2)}


def _nameservers() -> list[str]:
    servers: list[str] = []
    with contextlib.suppress(OSError), open("/etc/resolv.conf", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver":
                servers.append(parts[1])
    return servers[:3]


def _dns_query(server: str, name: str) -> str:
    """Send one A query for ``name`` to ``server``; "answered" if any reply came back."""
    qid = os.getpid() & 0xFFFF
    question = b"".join(bytes([len(p)]) + p.encode("ascii") for p in name.split(".")) + b"\0"
    packet = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.settimeout(CONNECT_S)
            sock.sendto(packet, (server, 53))
            reply = sock.recv(512)
    except OSError as exc:
        return err(exc)
    return "answered" if reply[:2] == packet[:2] else "garbage"


def _proxy_get(host: str) -> dict[str, Any]:
    """GET http://host/ through the run's proxy; the status code, or what went wrong."""
    proxy = os.environ.get("HTTP_PROXY")
    if not proxy:
        return {"result": "no-proxy-variable"}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
    try:
        with opener.open(f"http://{host}/", timeout=10) as resp:
            return {"result": "http", "status": resp.status, "server": resp.headers.get("Server", "")}
    except urllib.error.HTTPError as exc:
        return {"result": "http", "status": exc.code, "server": exc.headers.get("Server", "") if exc.headers else ""}
    except (OSError, urllib.error.URLError) as exc:
        return {"result": err(getattr(exc, "reason", exc))}


def egress(args: list[str]) -> dict[str, Any]:
    """Direct connections, a DNS query, and the proxy: ARGS = listener-port undeclared-host [host [ip]]."""
    port, undeclared = int(args[0]), args[1]
    host = args[2] if len(args) > 2 and args[2] else None
    address = args[3] if len(args) > 3 and args[3] else None
    name = host or undeclared
    out = {
        "loopback": _connect("127.0.0.1", port),
        "dns": {server: _dns_query(server, name) for server in _nameservers()},
        "proxy_undeclared": _proxy_get(undeclared),
    }
    if host:
        out["proxy_declared"] = _proxy_get(host)
    if address:
        out["direct_peer"] = _connect(address, 80)
    return out


def nproc(_args: list[str]) -> dict[str, Any]:
    """Fork sleeping children until the kernel refuses (RLIMIT_NPROC) or the bound is reached."""
    children: list[int] = []
    refused: str | None = None
    while len(children) < FORK_BOUND:
        try:
            pid = os.fork()
        except OSError as exc:
            refused = err(exc)
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in children:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
    import resource

    return {"forked": len(children), "refused": refused, "bound": FORK_BOUND,
            "rlimit": list(resource.getrlimit(resource.RLIMIT_NPROC))}


def _guessed_siblings(scratch: str) -> list[str]:
    """Names a later run's scratch directory might get, derived from this run's own name."""
    parent, base = os.path.split(scratch.rstrip("/"))
    stem = base.rstrip("0123456789")
    digits = base[len(stem):]
    names = [f"{stem}{int(digits) + n}" for n in range(1, 4)] if digits else []
    return [os.path.join(parent, n) for n in [*names, "selftest-planted"]]


def _sysv_shm(key: int) -> str:
    libc = _libc()
    libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
    shmid = libc.shmget(key, 4096, IPC_CREAT | 0o666)
    return "ok" if shmid >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def _detached_sleeper() -> int:
    """A grandchild in its own session that outlives this script unless something kills it."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(read_end)
            os.write(write_end, str(os.getpid()).encode())
            os.close(write_end)
            for fd in (0, 1, 2):
                with contextlib.suppress(OSError):
                    os.close(fd)
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    os.close(write_end)
    pid = int(os.read(read_end, 32) or b"0")
    os.close(read_end)
    return pid


def plant(args: list[str]) -> dict[str, Any]:
    """Leave files in every writable place, pre-create guessed names, start a detached sleeper."""
    token = args[0]
    scratch = os.environ.get("TMPDIR", "")
    places = [scratch, "/tmp", "/var/tmp", "/dev/shm", "/run", "/run/skill-mcp", os.path.dirname(scratch)]  # noqa: S108
    wrote: dict[str, str] = {}
    for place in dict.fromkeys(p for p in places if p):
        path = os.path.join(place, f"selftest-planted-{token}")
        wrote[path] = _try(functools.partial(_write_file, path))
    for path in _guessed_siblings(scratch) if scratch else []:
        wrote[path] = _try(functools.partial(os.mkdir, path, 0o777))
    key = int(token[:7], 16)
    return {"wrote": wrote, "shm_key": key, "shm": _sysv_shm(key), "sleeper": _detached_sleeper(),
            "scratch": scratch}


def _write_file(path: str) -> None:
    with open(path, "x", encoding="ascii") as fh:
        fh.write("left by an earlier run\n")


def find(args: list[str]) -> dict[str, Any]:
    """Which of ARGS = shm-key path... this run can see."""
    libc = _libc()
    libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
    key = int(args[0])
    return {"seen": {path: os.path.lexists(path) for path in args[1:]},
            "shm_seen": libc.shmget(key, 0, 0) >= 0, "scratch": os.environ.get("TMPDIR", "")}


LITTER_LEVELS = 1100  # deeper than Python's recursion limit: a recursive removal dies on it
LITTER_FILES = 20000


def _deep(top: str, name: str) -> str:
    """A chain of ``LITTER_LEVELS`` directories named ``name`` under ``top``, made by descriptor
    (its path is longer than PATH_MAX), the deepest one locked; "ok" or why not."""
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return err(exc)
    try:
        for _ in range(LITTER_LEVELS):
            os.mkdir(name, dir_fd=fd)
            new = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, name = new, "d"
        os.fchmod(fd, 0)
        return "ok"
    except OSError as exc:
        return err(exc)
    finally:
        os.close(fd)


def litter(args: list[str]) -> dict[str, Any]:
    """Leave what a clean-up must survive: a 1,100-level tree and many files in the run's own
    directory, and the tree in /tmp too where the write is allowed."""
    token = args[0]
    scratch = os.environ.get("TMPDIR", "")
    deep = {top: _deep(top, f"selftest-litter-{token}") for top in (scratch, "/tmp") if top}  # noqa: S108
    files = 0
    with contextlib.suppress(OSError):
        many = os.path.join(scratch, f"selftest-many-{token}")
        os.mkdir(many)
        for i in range(LITTER_FILES):
            os.close(os.open(os.path.join(many, str(i)), os.O_WRONLY | os.O_CREAT, 0o600))
            files += 1
    return {"scratch": scratch, "deep": deep, "files": files, "levels": LITTER_LEVELS}


def after(args: list[str]) -> dict[str, Any]:
    """What this run finds of the littering run ``args = TOKEN SCRATCH``: its directory, its tree
    in /tmp, anything in this run's own directory, and other processes of this uid."""
    token, earlier = args[0], args[1]
    uid = os.getuid()
    others = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            with contextlib.suppress(OSError, KeyError, ValueError):
                if int(status(entry)["Uid"].split()[0]) == uid:
                    others.append(int(entry))
    scratch = os.environ.get("TMPDIR", "")
    return {"earlier_scratch": os.path.lexists(earlier) if earlier else False,
            "tmp_tree": os.path.lexists(f"/tmp/selftest-litter-{token}"),  # noqa: S108
            "own_entries": len(_left(scratch)) if scratch else 0, "others": others, "scratch": scratch}


def _left(scratch: str) -> list[str]:
    """What a fresh run directory holds besides the run's own empty output directory."""
    out = os.environ.get("SKILL_OUTPUT_DIR", "")
    entries = os.listdir(scratch)
    if out and os.path.dirname(out) == scratch and os.path.basename(out) in entries and not os.listdir(out):
        entries.remove(os.path.basename(out))
    return entries



def _open_read(path: str) -> None:
    with open(path, "rb") as fh:
        fh.read(1)


def _ipc() -> dict[str, str]:
    """Each System V / POSIX IPC object and an io_uring, asked for and removed again if made."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    out: dict[str, str] = {}
    calls: tuple[tuple[str, Callable[[], int], Callable[[int], object]], ...] = (
            ("shmget", lambda: libc.shmget(0, 4096, IPC_CREAT | 0o600), lambda i: libc.shmctl(i, IPC_RMID, None)),
            ("msgget", lambda: libc.msgget(0, IPC_CREAT | 0o600), lambda i: libc.msgctl(i, IPC_RMID, None)),
            ("semget", lambda: libc.semget(0, 1, IPC_CREAT | 0o600), lambda i: libc.semctl(i, 0, IPC_RMID)),
            ("mq_open", lambda: libc.mq_open(f"/selftest-{os.getpid()}".encode(), os.O_CREAT | os.O_RDWR, 0o600,
                                             None), lambda i: libc.mq_unlink(f"/selftest-{os.getpid()}".encode())),
            ("io_uring_setup", lambda: libc.syscall(425, 1, None), os.close))
    for name, make, drop in calls:
        made = make()
        out[name] = "ok" if made >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
        if made >= 0:
            with contextlib.suppress(OSError):
                drop(made)
    return out


def _abstract(name: str) -> str:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_S)
            sock.connect("\0" + name)
    except OSError as exc:
        return err(exc)
    return "connected"


def confine(args: list[str]) -> dict[str, Any]:
    """The run's kernel sandbox, by effect. ARGS = listener-port proxy-port abstract-name server-pid roots...

    Files: another skill's SKILL.md and the shared writable places (denied), its own script and
    TMPDIR (allowed). Network: a loopback listener that is not the proxy (denied), the proxy's port
    (allowed). IPC: System V, POSIX queues, io_uring (denied). Scopes: an abstract unix socket the
    agent listens on, and a signal to the server (denied).
    """
    port, proxy, abstract, server = int(args[0]), int(args[1]), args[2], int(args[3])
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    others = [d for d in _skill_dirs(args[4:]) if os.path.exists(os.path.join(d, "SKILL.md"))
              and os.path.realpath(d) != os.path.realpath(own)]
    scratch = os.environ.get("TMPDIR", "")
    reads = {path: _try(functools.partial(_open_read, path))
             for path in [os.path.join(d, "SKILL.md") for d in others[:5]] + ["/run/skill-mcp/scratch"]}
    writes = _write_attempts(["/tmp", "/var/tmp", "/dev/shm", "/run"])  # noqa: S108 - the attempts are the point
    return {
        "reads": reads, "writes": writes,
        "own_read": _try(functools.partial(_open_read, os.path.abspath(__file__))),
        "own_write": _write_attempts([scratch]).get(scratch, "no TMPDIR") if scratch else "no TMPDIR",
        "connect_other": _connect("127.0.0.1", port), "connect_proxy": _connect("127.0.0.1", proxy),
        "ipc": _ipc(), "abstract": _abstract(abstract), "signal_server": _try(lambda: os.kill(server, 0)),
    }


MODES: dict[str, Callable[[list[str]], dict[str, Any]]] = {"posture": posture, "egress": egress, "nproc": nproc,
                                                           "plant": plant, "find": find, "confine": confine,
                                                           "litter": litter, "after": after}


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in MODES:
        print(json.dumps({"error": f"unknown mode {mode!r}"}))
        return 2
    print(json.dumps(MODES[mode](sys.argv[2:])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
