"""Hand-made catalog records and a runner for fence tests (no catalog scan involved)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skill_mcp.config import load_settings
from skill_mcp.models import Catalog, Declaration, ScriptDecl, Skill, SkillFile
from skill_mcp.runner.audit import AuditSink
from skill_mcp.runner.core import Runner
from skill_mcp.runner.harden import HardenReport
from skill_mcp.runner.interpreters import resolve_interpreters
from tests.helpers import write_skill

SCRUBBED = HardenReport(scrubbed=True, nondumpable=True)


def make_skill(
    root: Path, name: str, files: Mapping[str, str], run: Sequence[ScriptDecl] = (), egress: Sequence[str] = ()
) -> Skill:
    directory = write_skill(root, name, description="test", body="body\n")
    for rel, text in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    recs = []
    for rel in sorted(["SKILL.md", *files]):
        st = os.stat(directory / rel)
        recs.append(SkillFile(rel=rel, size=st.st_size, mtime_ns=st.st_mtime_ns, ino=st.st_ino))
    decl = Declaration(version=1, run=tuple(run), egress=tuple(egress)) if run or egress else None
    real = Path(os.path.realpath(directory))
    return Skill(
        name=name,
        directory=real,
        found_at=str(directory),
        root=Path(os.path.realpath(root)),
        frontmatter={"name": name, "description": "test"},
        description="test",
        files=tuple(recs),
        body_offset=0,
        declaration=decl,
    )


def one_script_catalog(root: Path, name: str, script: ScriptDecl) -> Catalog:
    """A catalog of the one skill ``root/name``, declaring only ``script``.

    For the child "servers" (``*_server.py``), which run a script through a real ``Runner``
    and never read the skill's files, so none are recorded.
    """
    directory = root / name
    skill = Skill(
        name=name,
        directory=directory,
        found_at=str(directory),
        root=root,
        frontmatter={},
        description=name,
        files=(),
        body_offset=0,
        declaration=Declaration(version=1, run=(script,)),
    )
    return Catalog(skills={name: skill}, problems=(), roots=(root,))


def catalog_of(*skills: Skill) -> Catalog:
    return Catalog(skills={s.name: s for s in sorted(skills, key=lambda s: s.name)}, problems=(), roots=())


def make_runner(
    environ: Mapping[str, str] | None = None,
    *,
    harden: HardenReport | None = SCRUBBED,
    audit: AuditSink | None = None,
    clock: Any = None,
    **kwargs: Any,
) -> Runner:
    env = {"PATH": "/usr/bin:/bin", **(environ or {})}
    settings = load_settings((), env)
    extra: dict[str, Any] = {}
    if clock is not None:
        extra["clock"] = clock
    return Runner.create(
        settings,
        harden=harden,
        audit=audit or (lambda record: None),
        interpreters=kwargs.pop("interpreters", None) or resolve_interpreters(),
        **extra,
        **kwargs,
    )


NOBODY = 65534


@functools.cache  # probing imports the SDK three times over; once per test session is enough
def nobody_python() -> tuple[str, str] | None:
    """A Python the unprivileged user can run, with a PYTHONPATH that finds this project and its
    dependencies; ``None`` when not root, no setpriv, or no such interpreter (the caller skips).

    Same-uid protections can only be observed between two processes of an ordinary uid: a root
    reader passes every /proc check.
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        return None
    stdlib = os.path.realpath(sys.base_prefix)
    paths = [
        p
        for p in sys.path
        if p and os.path.isdir(p) and (not os.path.realpath(p).startswith(stdlib) or "site-packages" in p)
    ]
    pythonpath = os.pathsep.join(paths)
    check = (
        "import anyio, mcp, skill_mcp.server, subprocess, sys; subprocess.run([sys.executable, '-c', ''], check=True)"
    )
    for candidate in (sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3"):
        probe = subprocess.run(
            [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", candidate, "-c", check],
            env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=60,
            check=False,
        )
        if probe.returncode == 0:
            return candidate, pythonpath
    return None


def wait_for_argv0(name: str, within_s: float = 30.0) -> int:
    """The pid of the process whose argv[0] is ``name`` (``exec -a NAME ...``), once one runs.

    How a test learns that its script is running: the script's sandbox lets it write nothing
    outside its run directory, so it cannot announce itself on a FIFO of the test's. A bounded
    poll of /proc for a condition, not a sleep to let things settle.
    """
    import time

    wanted = name.encode() + b"\0"
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if fh.read().startswith(wanted):
                        return int(entry)
            except OSError:
                continue
        time.sleep(0.02)
    raise TimeoutError(f"no process named {name!r} started within {within_s} s")
