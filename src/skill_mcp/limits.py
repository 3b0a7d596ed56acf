"""Run limits, read caps, the interpreter set and the capture rules: one home for both sides.

The standalone spawner (``runner.spawn_local``) and the appliance's broker
(``skill_mcp_launcher``) both import this module, so a limit, an interpreter name or the
capture bound cannot drift between them. It is a leaf: the standard library only, nothing
else from ``skill_mcp``, because the launcher's import allowlist admits it
(tests/appliance/test_launcher_imports.py). docs/fence.md's limits table is checked against
``limits_table()`` (tests/fence/test_limits_doc.py); docs/architecture.md's read caps table
against ``READ_CAPS.table()`` (tests/fence/test_read_caps.py).
"""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from skill_mcp.sandbox_rules import sandbox_table

RunStatus = Literal["ok", "error", "timeout", "killed"]

# The lookup path for interpreters, and the PATH a script gets. A constant, so that neither
# the environment a process was started with nor a declaration can point "python" elsewhere.
FIXED_PATH = "/usr/local/bin:/usr/bin:/bin"

# Declared name -> executable names tried in order on FIXED_PATH. The closed set.
CANDIDATES: Mapping[str, tuple[str, ...]] = {
    "node": ("node", "nodejs"),
    "python": ("python3", "python"),
    "bash": ("bash",),
}
KNOWN = tuple(CANDIDATES)

DEFAULT_TIMEOUT_S = 60  # a declaration without ``timeout``
MAX_TIMEOUT_S = 300  # the ceiling whatever a declaration says
KIB = 1024
MIB = 1024 * KIB
TERM_GRACE_S = 1.0  # SIGTERM -> SIGKILL at a deadline
DRAIN_S = 0.5  # after the exit, how long a detached holder of the pipes may keep them open
# skill_run's arguments: count, one argument's characters, all arguments' characters.
MAX_ARGS = 64
MAX_ARG_CHARS = 8 * 1024
MAX_ARGS_TOTAL_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class ReadCaps:
    """Every cap on the bytes one read takes, named once; each module that reads uses its field.

    ``why`` says why each is what it is, in particular why a file is 1 MiB through a tool and
    16 MiB through a resource: a tool answer is read into a model's context (and four files of
    a batch together stay at 4 MiB), while a resource is a whole file a host fetches to install
    the skill, bounded only by what the Skills extension lets one skill hold.
    """

    skill_md: int = MIB
    frontmatter: int = 64 * KIB
    file_by_tool: int = MIB
    batch_by_tool: int = 4 * MIB
    file_by_resource: int = 16 * MIB
    skill_total: int = 16 * MIB
    script: int = 16 * MIB
    pack_json: int = 4 * MIB
    credential_scan: int = MIB
    capture: int = MIB
    run_outputs: int = 32 * MIB
    declarations: int = 16 * MIB
    answers_at_once: int = 16 * MIB

    def why(self) -> dict[str, str]:
        """Field -> where it applies and why it has this value."""
        return {
            "skill_md": "a SKILL.md; a larger one is refused (skill-too-large), never cut: a cut file "
            "would not match the digest its listings publish",
            "frontmatter": "the YAML block at the top of a SKILL.md, and so one mcp-host: declaration",
            "file_by_tool": "one file skill_file answers: the answer goes into a model's context",
            "batch_by_tool": "all files of one skill_file call, counted from their sizes before reading",
            "file_by_resource": "one file resources/read answers: a whole file a host fetches to install "
            "the skill, so as large as the skill may be",
            "skill_total": "a skill's served files in all (the Skills extension's limit); the rest is "
            "reported (files-over-limit)",
            "script": "a script the runner reads to pin its digest: never above a whole skill",
            "pack_json": "a pack.json",
            "credential_scan": "a file validate scans for credentials; a larger one is not scanned",
            "capture": "a run's stdout, and its stderr: the rest is read, counted and dropped",
            "run_outputs": "the files of SKILL_OUTPUT_DIR one run hands back",
            "declarations": "the declared-skills document the appliance's parse helper writes",
            "answers_at_once": "the file content all answers not yet sent hold together, server-wide, "
            "counted from the scanned sizes before any read until the answer has left (over HTTP: written "
            "to the connection, or the connection closed): a read that does not fit waits its turn "
            "(answers-busy after a minute); one larger than this is made alone",
        }

    def table(self) -> dict[str, tuple[str, str]]:
        """Field -> (size as docs/architecture.md's read caps table spells it, why)."""

        def show(n: int) -> str:
            return f"{n // MIB} MiB" if n % MIB == 0 else f"{n // KIB} KiB"

        return {name: (show(getattr(self, name)), why) for name, why in self.why().items()}


READ_CAPS = ReadCaps()
# What one YAML document (a frontmatter, an mcp-host: block) may hold, whichever reader reads it
# (catalog.yaml12, catalog.yaml_simple): values (every key, value, item, mapping and sequence
# counts one) and depth (the root is 1, each node one more than its parent). A frontmatter holds
# a few dozen values three or four deep, and an mcp-host: block at the declaration bounds fewer
# than YAML_VALUES_MAX. Beyond the byte cap, these bound what a text can cost PyYAML's pure-Python
# loader, which reads the corners libyaml reads otherwise and words every refusal: about 25 us a
# value, and a scanner that slows with the square of the flow depth.
YAML_VALUES_MAX = 4096
YAML_DEPTH_MAX = 64
CAPTURE_LIMIT = READ_CAPS.capture  # bytes kept per stream; the rest is read, counted and dropped

# The appliance's egress proxy port (``skill_mcp_launcher.proxy`` reads it from here: this leaf
# never imports the launcher, and the sandbox's TCP rule needs it).
PROXY_PORT = 8888


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits set on a script before it starts (soft = hard). ``None``: not set."""

    nproc: int | None  # counts threads too; node needs about a dozen
    nofile: int
    fsize: int
    address_space: int | None
    core: int = 0

    def pairs(self) -> tuple[tuple[int, int], ...]:
        """``(RLIMIT_*, value)`` for every limit that is set, NPROC first."""
        pairs = [
            (resource.RLIMIT_NPROC, self.nproc),
            (resource.RLIMIT_NOFILE, self.nofile),
            (resource.RLIMIT_FSIZE, self.fsize),
            (resource.RLIMIT_AS, self.address_space),
            (resource.RLIMIT_CORE, self.core),
        ]
        return tuple((which, value) for which, value in pairs if value is not None)


# Standalone: NPROC only when the script runs under a uid of its own (a root server's drop);
# under the server's own uid it would count the server's threads too. No address-space
# limit: the script shares the user's machine and its limits.
STANDALONE = Limits(nproc=256, nofile=256, fsize=64 * MIB, address_space=None)
# The appliance: the script uid is the container's alone, so NPROC bounds a fork bomb; node
# reserves large virtual ranges at start, hence 4 GiB of address space.
APPLIANCE = Limits(nproc=64, nofile=256, fsize=64 * MIB, address_space=4096 * MIB)


# The kernel's OOM killer picks the process with the highest badness (its memory, plus
# ``oom_score_adj`` thousandths of the memory it may use): a script at 1000 goes before the
# server and the launcher whatever their size. Raising one's own score needs no privilege; lowering
# it below what the container started with needs CAP_SYS_RESOURCE, which the documented flags do
# not grant, so the launcher and server get their low scores only where the platform allows them.
SCRIPT_OOM_SCORE_ADJ = 1000
SERVER_OOM_SCORE_ADJ = -900
LAUNCHER_OOM_SCORE_ADJ = -1000
OOM_SCORE_ADJ_PATH = "/proc/self/oom_score_adj"


def set_oom_score_adj(value: int) -> int:
    """Ask for ``value`` as this process's ``oom_score_adj``; return the value in force afterwards
    (the old one when the kernel refused a lowering this process may not make)."""
    try:
        fd = os.open(OOM_SCORE_ADJ_PATH, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, str(value).encode())
        finally:
            os.close(fd)
    except OSError:
        pass
    with open(OOM_SCORE_ADJ_PATH, encoding="ascii") as fh:
        return int(fh.read().strip())


def limits_table() -> dict[str, tuple[str, str]]:
    """Limit name -> (standalone, appliance), as docs/fence.md's table spells the values."""

    def show(value: int | None, unit: int = 1, suffix: str = "") -> str:
        return "not set" if value is None else f"{value // unit}{suffix}"

    return {
        "RLIMIT_NPROC": (show(STANDALONE.nproc) + " (only when dropped from root)", show(APPLIANCE.nproc)),
        "RLIMIT_NOFILE": (show(STANDALONE.nofile), show(APPLIANCE.nofile)),
        "RLIMIT_FSIZE": (show(STANDALONE.fsize, MIB, " MiB"), show(APPLIANCE.fsize, MIB, " MiB")),
        "RLIMIT_AS": (show(STANDALONE.address_space, MIB, " MiB"), show(APPLIANCE.address_space, MIB, " MiB")),
        "RLIMIT_CORE": (show(STANDALONE.core), show(APPLIANCE.core)),
        "oom_score_adj of a script": (str(SCRIPT_OOM_SCORE_ADJ), str(SCRIPT_OOM_SCORE_ADJ)),
        "oom_score_adj of the server and launcher": (
            "not changed (the user's)",
            f"{SERVER_OOM_SCORE_ADJ} and {LAUNCHER_OOM_SCORE_ADJ} where the container allows a lowering, "
            "else the container's own",
        ),
        "default timeout": (f"{DEFAULT_TIMEOUT_S} s", f"{DEFAULT_TIMEOUT_S} s"),
        "timeout ceiling": (f"{MAX_TIMEOUT_S} s", f"{MAX_TIMEOUT_S} s"),
        "capture per stream": (show(CAPTURE_LIMIT, MIB, " MiB"), show(CAPTURE_LIMIT, MIB, " MiB")),
        "SIGTERM to SIGKILL": (f"{TERM_GRACE_S:g} s", f"{TERM_GRACE_S:g} s"),
        "drain after exit": (f"{DRAIN_S:g} s", f"{DRAIN_S:g} s"),
        **sandbox_table(PROXY_PORT),
    }


def find_interpreters(search_path: str = FIXED_PATH, only: tuple[str, ...] | None = None) -> dict[str, str]:
    """Each known interpreter looked up once on ``search_path``: name -> absolute real path."""
    found: dict[str, str] = {}
    for name, candidates in CANDIDATES.items():
        if only is not None and name not in only:
            continue
        for exe in candidates:
            hit = shutil.which(exe, path=search_path)
            if hit:
                found[name] = os.path.realpath(hit)
                break
    return found


def clamp_timeout(value: object, declared: float = DEFAULT_TIMEOUT_S) -> float:
    """A usable timeout: ``value`` when it is a positive number, else ``declared``; never over the ceiling."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        value = declared
    return float(min(value, MAX_TIMEOUT_S))


def run_status(exit_code: int | None, signal_name: str | None, timed_out: bool) -> RunStatus:
    """``timeout`` (deadline hit), ``killed`` (a signal), ``ok`` (exit 0) or ``error``."""
    if timed_out:
        return "timeout"
    if signal_name is not None:
        return "killed"
    return "ok" if exit_code == 0 else "error"


@dataclass(slots=True)
class Capture:
    """One stream's output, kept up to ``limit`` bytes; the rest is counted, never buffered."""

    limit: int = CAPTURE_LIMIT
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")
