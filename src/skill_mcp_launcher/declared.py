"""The skills' declarations, read by an unprivileged helper and checked for shape here.

The broker needs each skill's ``mcp-host:`` block (declared scripts, interpreters, variables,
hosts, timeouts) to decide a run itself, but SKILL.md is untrusted and this process is root:
it never parses one. It forks a child that empties its resource budget to a small one, drops
to the parse user (a uid nothing else runs as: no capabilities, no-new-privileges, and no
egress, because the ruleset names no rule for it) and execs the server's own Python on
``skill_mcp.runner.declared``, which parses with the catalog's code and marks itself
non-dumpable first. What comes back is a bounded JSON document (parsed here with ``json``,
the standard library's, on bytes capped at ``MAX_OUTPUT``, nesting bounded first) whose every field is checked for
type and size before it becomes a ``DeclaredSkill``. A helper that fails, hangs past
``HELPER_TIMEOUT_S`` or answers a document out of shape yields no declarations: nothing runs.
One skill's entry out of shape or past the bounds the catalog enforces too
(``grantrules.DECLARATION_BOUNDS``) costs only that skill.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skill_mcp import jsonbound
from skill_mcp.grantrules import DECLARATION_BOUNDS, NAME_RE
from skill_mcp_launcher import procs

PARSE_USER = ("skillmcp-parse", 10004)
# The launcher's own interpreter: the image's venv, where skill_mcp is installed.
PYTHON = sys.executable
HELPER_TIMEOUT_S = 30.0
MAX_OUTPUT = 16 * 1024 * 1024
MAX_SKILLS = 20_000
# One skill's bounds are the catalog's (``DECLARATION_BOUNDS``): what ``validate`` passes is accepted
# here, and an entry past them costs only that skill.
BOUNDS = DECLARATION_BOUNDS
# The helper's budget: enough for the catalog of a large root, nothing to write, no children.
HELPER_LIMITS = ((resource.RLIMIT_AS, 1024 * 1024 * 1024), (resource.RLIMIT_CPU, 60),
                 (resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_NOFILE, 256), (resource.RLIMIT_CORE, 0),
                 (resource.RLIMIT_NPROC, 16))


class DeclaredError(RuntimeError):
    """The declarations could not be read, or came back out of shape."""


@dataclass(frozen=True, slots=True)
class DeclaredScript:
    script: str
    interpreter: str
    env: tuple[str, ...]
    timeout: int


@dataclass(frozen=True, slots=True)
class DeclaredSkill:
    name: str
    directory: str
    skill_md: tuple[int, ...]
    egress: tuple[str, ...]
    scripts: tuple[DeclaredScript, ...]

    def script(self, rel: str) -> DeclaredScript | None:
        for row in self.scripts:
            if row.script == rel:
                return row
        return None

    def changed(self) -> bool:
        """True when SKILL.md is no longer the file the helper read (a stat; nothing is parsed)."""
        try:
            st = os.stat(os.path.join(self.directory, "SKILL.md"))
        except OSError:
            return True
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != self.skill_md


@dataclass(frozen=True, slots=True)
class Dropped:
    """A skill whose entry in the declarations document was out of shape or past ``BOUNDS``."""

    name: str
    detail: str
    # Its directory and SKILL.md identity, when the entry carried usable ones: the broker asks
    # the helper again only once that file changed (a stat), not on every request naming it.
    directory: str | None = None
    skill_md: tuple[int, ...] | None = None

    def changed(self) -> bool:
        if self.skill_md is None or self.directory is None:
            return True
        return DeclaredSkill(self.name, self.directory, self.skill_md, (), ()).changed()


@dataclass(frozen=True, slots=True)
class Declarations:
    skills: Mapping[str, DeclaredSkill]
    parsed_as: int  # the uid the helper ran as (the launcher chose it; the helper confirms it)
    # Skills left out, each for its own entry: one skill's declaration never costs the others.
    dropped: Mapping[str, Dropped] = field(default_factory=dict)


def parse_account() -> procs.Account:
    """The parse user, baked into the image; refuse one with a surprising uid or group 0."""
    name, uid = PARSE_USER
    entry = pwd.getpwnam(name)
    if entry.pw_uid != uid or entry.pw_gid == 0:
        raise RuntimeError(f"user {name} has uid {entry.pw_uid} gid {entry.pw_gid}; expected {uid}")
    return procs.Account(name, entry.pw_uid, entry.pw_gid)


def _str(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value or "\0" in value or len(value) > limit:
        raise DeclaredError(f"{what} is not a string of 1 to {limit} characters")
    return value


def _names(value: Any, what: str, count: int, limit: int) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > count:
        raise DeclaredError(f"{what} is not a list of at most {count} entries")
    return tuple(_str(v, what, limit) for v in value)


def _script(raw: Any) -> DeclaredScript:
    if not isinstance(raw, dict):
        raise DeclaredError("a script entry is not an object")
    env = _names(raw.get("env"), "env", BOUNDS.names, BOUNDS.name_chars)
    if not all(NAME_RE.fullmatch(n) for n in env):
        raise DeclaredError("an env entry is not a plain variable name")
    timeout = raw.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 0 < timeout <= BOUNDS.timeout_s:
        raise DeclaredError("a timeout is not a positive whole number of seconds")
    return DeclaredScript(_str(raw.get("script"), "script", BOUNDS.script_chars),
                          _str(raw.get("interpreter"), "interpreter", BOUNDS.interpreter_chars), env, timeout)


def _skill_md(raw: Any) -> tuple[int, ...]:
    key = raw.get("skillMd") if isinstance(raw, dict) else None
    if not isinstance(key, list) or len(key) != 5 or not all(type(k) is int for k in key):
        raise DeclaredError("skillMd is not five integers")
    return tuple(key)


def _skill(raw: Any) -> DeclaredSkill:
    if not isinstance(raw, dict):
        raise DeclaredError("a skill entry is not an object")
    key = _skill_md(raw)
    scripts = raw.get("scripts")
    if not isinstance(scripts, list) or len(scripts) > BOUNDS.scripts:
        raise DeclaredError(f"scripts is not a list of at most {BOUNDS.scripts}")
    directory = _str(raw.get("directory"), "directory", BOUNDS.directory_chars)
    if not os.path.isabs(directory):
        raise DeclaredError("directory is not absolute")
    return DeclaredSkill(_str(raw.get("name"), "name", BOUNDS.skill_chars), directory, key,
                         _names(raw.get("egress"), "egress", BOUNDS.hosts, BOUNDS.host_chars),
                         tuple(_script(s) for s in scripts))


def _entry_name(raw: Any) -> str | None:
    """The name an entry claims, when it is a plain one (a dropped entry is reported under it)."""
    name = raw.get("name") if isinstance(raw, dict) else None
    return name if isinstance(name, str) and 0 < len(name) <= BOUNDS.skill_chars and "\0" not in name else None


def _dropped(raw: dict[str, Any], name: str, detail: str) -> Dropped:
    try:
        key: tuple[int, ...] | None = _skill_md(raw)
    except DeclaredError:
        key = None
    directory = raw.get("directory")
    usable = isinstance(directory, str) and os.path.isabs(directory) and len(directory) <= BOUNDS.directory_chars \
        and "\0" not in directory
    return Dropped(name, detail, directory if usable else None, key)


def check_document(raw: bytes) -> Declarations:
    """The helper's output, checked for shape: every field typed and bounded.

    The document as a whole (an object with ``uid`` and at most ``MAX_SKILLS`` entries) must be
    in shape, or ``DeclaredError``; a skill entry out of shape or past ``BOUNDS`` is dropped
    alone (in ``dropped``, under the name it claims), so one skill's declaration never stops
    another's scripts. A name listed twice is dropped both times: neither entry is trusted.
    """
    try:
        doc = jsonbound.loads(raw)
    except ValueError as exc:
        raise DeclaredError(f"the helper's output is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("skills"), list) or len(doc["skills"]) > MAX_SKILLS:
        raise DeclaredError("the helper's output is not {uid, skills: [...]}")
    uid = doc.get("uid")
    if type(uid) is not int:
        raise DeclaredError("the helper's output has no uid")
    out: dict[str, DeclaredSkill] = {}
    dropped: dict[str, Dropped] = {}
    for entry in doc["skills"]:
        try:
            skill = _skill(entry)
        except DeclaredError as exc:
            name = _entry_name(entry)
            if name is not None and isinstance(entry, dict):
                out.pop(name, None)
                dropped[name] = _dropped(entry, name, str(exc))
            continue
        if skill.name in out or skill.name in dropped:
            out.pop(skill.name, None)
            dropped[skill.name] = Dropped(skill.name, "the skill is listed twice")
            continue
        out[skill.name] = skill
    return Declarations(out, uid, dropped)


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
        os.execve(PYTHON, [PYTHON, "-I", "-m", "skill_mcp.runner.declared"], env)  # noqa: S606 - argv array
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            os.write(2, f"declarations helper failed to start: {exc}\n".encode())
    os._exit(127)


def read(account: procs.Account, roots: tuple[str, ...], reaper: procs.Reaper, *,
         timeout: float = HELPER_TIMEOUT_S) -> Declarations:
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
    found = check_document(data)
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
            if len(buf) > MAX_OUTPUT:
                raise DeclaredError(f"the declarations helper wrote more than {MAX_OUTPUT} bytes")
