"""What the self-test agent observes from the server's side: it *is* the server's process.

Everything here runs as the server uid, in the process that hosts the real server, so each
observation is what an attacker who took over the server would see: its own capabilities,
its environment block, its memory, the files and the ruleset that uid can touch.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
NFT = "/usr/sbin/nft"
CHUNK = 1 << 20
_MAPS = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s*(.*)$")
# A same-uid process (a child of the server, fresh from exec, so dumpable itself) tries to open
# the server's /proc files: non-dumpable makes them root's, and the open fails.
_SIBLING = (
    "import errno, json, os, sys\nout = {}\nfor what in ('environ', 'mem'):\n"
    " try:\n  os.close(os.open(f'/proc/{sys.argv[1]}/{what}', os.O_RDONLY)); out[what] = 'ok'\n"
    " except OSError as exc:\n  out[what] = errno.errorcode.get(exc.errno, str(exc.errno))\n"
    "print(json.dumps(out))\n"
)


def status() -> dict[str, str]:
    out: dict[str, str] = {}
    with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return {k: out.get(k, "") for k in ("Uid", "CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd", "NoNewPrivs")}


def dumpable() -> int:
    return int(ctypes.CDLL(None, use_errno=True).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))


@contextlib.contextmanager
def own_memory() -> Iterator[int]:
    """This process's ``/proc/self/mem``, open for reading, for the duration of the block.

    A non-dumpable process cannot open its own ``/proc`` memory files (they become root's), and
    the container's default seccomp profile refuses ``process_vm_readv`` without SYS_PTRACE. So
    the process is made dumpable for the block and non-dumpable again after it. Call it only
    after ``sibling_reads`` has checked non-dumpable, when no other process of this uid exists.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    before = dumpable()
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        fd = os.open("/proc/self/mem", os.O_RDONLY)
        try:
            yield fd
        finally:
            os.close(fd)
    finally:
        libc.prctl(PR_SET_DUMPABLE, before, 0, 0, 0)


def read_own(mem: int, address: int, size: int) -> bytes | None:
    """``size`` bytes at ``address`` through ``own_memory``'s descriptor; ``None`` if unmapped."""
    try:
        return os.pread(mem, size, address)
    except OSError:
        return None


def environ_block_bytes(mem: int) -> int:
    """How many non-NUL bytes the exec-time environment block still holds (0 once wiped).

    Read from memory at ``env_start..env_end`` (``/proc/self/stat``), which is exactly what
    ``/proc/<pid>/environ`` would show a reader.
    """
    with open("/proc/self/stat", encoding="ascii") as fh:
        rest = fh.read().rsplit(")", 1)[1].split()
    start, end = int(rest[50 - 3]), int(rest[51 - 3])
    data = read_own(mem, start, end - start) if 0 < start < end else b""
    return len((data or b"").replace(b"\0", b""))


def sibling_reads() -> dict[str, str]:
    """A same-uid process's attempt to open this process's ``environ`` and ``mem``."""
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", _SIBLING, str(os.getpid())],
            capture_output=True,
            timeout=30,
            check=False,
            env={},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": str(exc)}
    try:
        out: dict[str, str] = json.loads(proc.stdout)
    except ValueError:
        return {"error": proc.stderr.decode(errors="replace")[-300:]}
    return out


def nft_attempt() -> dict[str, object]:
    """Try to change the ruleset as this uid (it must be refused)."""
    try:
        proc = subprocess.run(
            [NFT, "flush", "ruleset"], capture_output=True, timeout=10, check=False, env={"PATH": "/usr/bin:/bin"}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": None, "error": str(exc)}
    return {"rc": proc.returncode, "stderr": proc.stderr.decode(errors="replace")[-300:]}


def write_attempts(dirs: Iterable[str]) -> dict[str, str]:
    out = {}
    for directory in dirs:
        path = os.path.join(directory, f".selftest-server-write-{os.getpid()}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            out[directory] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            continue
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        out[directory] = "ok"
    return out


def processes_of(uid: int) -> list[dict[str, object]]:
    """Every process of ``uid`` in this PID namespace, zombies included."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as fh:
                fields = dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            found.append({"pid": int(entry), "name": fields.get("Name", ""), "state": fields.get("State", "")[:1]})
    return found


def holds_canary(data: bytes, prefix: bytes, sha256: str, length: int) -> bool:
    """True if ``data`` holds the canary: ``prefix`` followed by the rest hashing to ``sha256``."""
    start = data.find(prefix)
    while start >= 0:
        if hashlib.sha256(data[start : start + length]).hexdigest() == sha256:
            return True
        start = data.find(prefix, start + 1)
    return False


def _writable_regions() -> Iterator[tuple[int, int]]:
    """Writable mappings: heap, stacks, anonymous and data segments, where values live.

    ``/proc/self/maps`` stays readable to a non-dumpable process (mode 0444); only the memory
    itself is read through ``own_memory``.
    """
    with open("/proc/self/maps", encoding="ascii", errors="replace") as fh:
        for line in fh:
            match = _MAPS.match(line.rstrip("\n"))
            if match is None:
                continue
            perms, name = match.group(3), match.group(4)
            if perms[0] == "r" and perms[1] == "w" and not name.startswith("[v"):
                yield int(match.group(1), 16), int(match.group(2), 16)


def memory_holds_canary(mem: int, prefix: bytes, sha256: str, length: int) -> bool:
    """Scan this process's writable memory for the canary (``mem`` from ``own_memory``).

    Chunks overlap by ``length`` bytes, so a value split across a chunk boundary is found.
    A range that cannot be read (unmapped since the listing) is skipped.
    """
    for start, end in _writable_regions():
        pos = start
        while pos < end:
            data = read_own(mem, pos, min(CHUNK + length, end - pos))
            if not data:
                break
            if holds_canary(data, prefix, sha256, length):
                return True
            pos += CHUNK
    return False
