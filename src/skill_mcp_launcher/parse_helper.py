"""The skills' declarations, read by an unprivileged helper and checked for shape here.

The broker needs each skill's ``mcp-host:`` block (declared scripts, interpreters, variables,
hosts, timeouts) to decide a run itself, but SKILL.md is untrusted and this process is root:
it never parses one. It forks a child that empties its resource budget to a small one, drops
to the parse user (a uid nothing else runs as: no capabilities, no-new-privileges, and no
egress, because the ruleset names no rule for it) and execs the server's own Python on
``skill_mcp.runner.dump_declarations``, which parses with the catalog's code and marks itself
non-dumpable first. What comes back is the declared-skills document (``skill_mcp.declwire``:
its one record type, its shape and its decoder, shared with the helper that writes it), read
here on bytes capped at ``declwire.MAX_DOCUMENT`` and decoded by ``declwire.decode``, which
checks every field for type and size. A helper that fails, hangs past ``HELPER_TIMEOUT_S`` or
answers a document out of shape yields no declarations: nothing runs. One skill's entry out of
shape or past the bounds the catalog enforces too (``grantrules.DECLARATION_BOUNDS``) costs
only that skill.

Why a helper rather than a parse before the broker serves: the server reloads skills
(``serve --watch``), so the broker re-reads when a SKILL.md's identity (a ``stat``, which
parses nothing) differs from the one the helper reported, or when a request names a skill it
does not know. See docs/deploy.md.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import selectors
import signal
import sys
import time

from skill_mcp.declwire import MAX_DOCUMENT, Declarations, DeclaredError, decode
from skill_mcp_launcher import procs

PARSE_USER = ("skillmcp-parse", 10004)
# The launcher's own interpreter: the image's venv, where skill_mcp is installed.
PYTHON = sys.executable
HELPER_TIMEOUT_S = 30.0
# The helper's budget: enough for the catalog of a large root, nothing to write, no children.
HELPER_LIMITS = (
    (resource.RLIMIT_AS, 1024 * 1024 * 1024),
    (resource.RLIMIT_CPU, 60),
    (resource.RLIMIT_FSIZE, 0),
    (resource.RLIMIT_NOFILE, 256),
    (resource.RLIMIT_CORE, 0),
    (resource.RLIMIT_NPROC, 16),
)


def parse_account() -> procs.Account:
    """The parse user, baked into the image; refuse one with a surprising uid or group 0."""
    name, uid = PARSE_USER
    entry = pwd.getpwnam(name)
    if entry.pw_uid != uid or entry.pw_gid == 0:
        raise RuntimeError(f"user {name} has uid {entry.pw_uid} gid {entry.pw_gid}; expected {uid}")
    return procs.Account(name, entry.pw_uid, entry.pw_gid)


def _child(account: procs.Account, roots: tuple[str, ...], out_w: int) -> None:  # pragma: no cover - child
    try:
        procs.reset_signals()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        procs.close_fds_from(3)
        for which, value in HELPER_LIMITS:
            resource.setrlimit(which, (value, value))
        procs.drop_to(account)
        os.chdir("/")
        env = {"PATH": "/usr/bin:/bin", "SKILLS_DIR": ":".join(roots), "SKILL_MCP_LOG": "error"}
        os.execve(PYTHON, [PYTHON, "-I", "-m", "skill_mcp.runner.dump_declarations"], env)  # noqa: S606 - argv array
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            os.write(2, f"declarations helper failed to start: {exc}\n".encode())
    os._exit(127)


def read(
    account: procs.Account, roots: tuple[str, ...], reaper: procs.Reaper, *, timeout: float = HELPER_TIMEOUT_S
) -> Declarations:
    """Run the helper as ``account`` and return its checked declarations, or raise ``DeclaredError``."""
    if not roots:
        return Declarations({}, account.uid)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        _child(account, roots, out_w)
    reaper.watch(pid)
    os.close(out_w)
    try:
        data = _collect(out_r, timeout)
    finally:
        os.close(out_r)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # a no-op after a normal exit: the zombie is not reaped yet
        status = reaper.wait(pid, 5.0)
    if status is None or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        raise DeclaredError(f"the declarations helper failed (status {status})")
    found = decode(data)
    if found.parsed_as != account.uid:
        raise DeclaredError(f"the declarations helper ran as uid {found.parsed_as}, not {account.uid}")
    return found


def _collect(fd: int, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    buf = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeclaredError(f"the declarations helper did not finish in {timeout:g} s")
            if not sel.select(left):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return bytes(buf)
            buf += chunk
            if len(buf) > MAX_DOCUMENT:
                raise DeclaredError(f"the declarations helper wrote more than {MAX_DOCUMENT} bytes")
