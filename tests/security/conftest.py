"""Fixtures for the standalone half of the security suite: a skills tree full of traps, and one
real server per module driven by the SDK client over stdio.

The tree is built per module in a world-readable temporary directory (a root server drops
scripts to the suite's script user, who must be able to read them). The traps - symlinks out
of the skill, to ``/proc/self/environ``, to a sibling, through a directory, a FIFO, a directory
and a device node named like scripts - can only be made at test time.

After every test that used the server, ``after_each`` proves the two invariants the issue asks
of every case: the server still answers, and no process of the script uid is left.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.appliance import conftest as appliance_conftest
from tests.helpers import eventually, wait_until
from tests.security.harness import (
    RUNS_TMP,
    Session,
    open_session,
    procs_of_uid,
    script_account,
    server_params,
    zombies_of_uid,
)

HERE = Path(__file__).resolve().parent
PROBE = appliance_conftest.SKILLS / "probe" / "scripts" / "probe.py"  # the one probe both suites run
SECRET = "sec-canary-" + secrets.token_hex(8)
GRANTED = "granted-" + secrets.token_hex(4)
LOADERS = ("LD_PRELOAD", "PYTHONPATH", "NODE_OPTIONS", "BASH_ENV")
TRAPS = {  # declared script -> what it really is
    "scripts/link-outside.py": "symlink to a file outside every skill",
    "scripts/link-environ.py": "symlink to /proc/self/environ",
    "scripts/link-sibling.py": "symlink to a sibling skill's script",
    "linkdir/x.py": "a path through a directory symlink to a sibling skill",
    "scripts/fifo.py": "a FIFO",
    "scripts/dir.py": "a directory",
    "scripts/dev.py": "a character device node",
}

SEC_MD = """---
name: sec
description: Security suite probe skill - each mode is one hostile thing a script might do.
mcp-host:
  version: 1
  run:
    - script: scripts/probe.py
      interpreter: python
      timeout: 30
      env: [SEC_GRANTED, SEC_DECLARED_ONLY, LD_PRELOAD, PYTHONPATH, NODE_OPTIONS, BASH_ENV]
    - script: scripts/short.py
      interpreter: python
      timeout: 2
    - script: alias/probe.py
      interpreter: python
    - script: scripts/hello.sh
      interpreter: bash
{traps}  egress: [allowed.test]
---
Test-only skill.
"""


def _write_tree(root: Path) -> None:
    sec, other = root / "sec", root / "other"
    (sec / "scripts").mkdir(parents=True)
    (other / "scripts").mkdir(parents=True)
    traps = "".join(f"    - script: {t}\n      interpreter: python\n" for t in TRAPS)
    (sec / "SKILL.md").write_text(SEC_MD.format(traps=traps), encoding="utf-8")
    shutil.copy(PROBE, sec / "scripts" / "probe.py")
    shutil.copy(PROBE, sec / "scripts" / "short.py")
    (sec / "scripts" / "hello.sh").write_text('echo "hello $1"\n', encoding="utf-8")
    (sec / "notes.md").write_text("an undeclared file\n", encoding="utf-8")
    os.symlink("scripts", sec / "alias")  # an intermediate directory symlink that stays inside
    (other / "SKILL.md").write_text("---\nname: other\ndescription: A sibling skill.\n---\nbody\n", encoding="utf-8")
    (other / "scripts" / "x.py").write_text("print('sibling ran')\n", encoding="utf-8")
    (root.parent / f"{root.name}-outside.py").write_text("print('outside ran')\n", encoding="utf-8")
    os.symlink(root.parent / f"{root.name}-outside.py", sec / "scripts" / "link-outside.py")
    os.symlink("/proc/self/environ", sec / "scripts" / "link-environ.py")
    os.symlink("../../other/scripts/x.py", sec / "scripts" / "link-sibling.py")
    os.symlink("../other/scripts", sec / "linkdir")
    os.mkfifo(sec / "scripts" / "fifo.py")
    (sec / "scripts" / "dir.py").mkdir()
    if os.geteuid() == 0:
        os.mknod(sec / "scripts" / "dev.py", 0o644 | 0o020000, os.makedev(1, 3))  # /dev/null's numbers
    for path in [root, *root.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)


@pytest.fixture(scope="module")
def sec_root() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-sec-"))
    base.chmod(0o755)
    root = base / "skills"
    root.mkdir()
    (base / "out").mkdir()
    (base / "out").chmod(0o1777)  # scripts leave pid files here for the tests to read
    _write_tree(root)
    try:
        yield root
    finally:
        shutil.rmtree(base, ignore_errors=True)


def server_env(**extra: str) -> dict[str, str]:
    account = script_account()
    grant = (
        '[{"skill": "sec", "script": "scripts/probe.py", "env": ["SEC_GRANTED", '
        + ", ".join(f'"{n}"' for n in LOADERS)
        + '], "egress": ["allowed.test"]},'
        ' {"skill": "sec", "script": "scripts/short.py"}, {"skill": "sec", "script": "alias/probe.py"},'
        ' {"skill": "sec", "script": "scripts/hello.sh"}'
        + "".join(f', {{"skill": "sec", "script": "{t}"}}' for t in TRAPS)
        + "]"
    )
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "SKILL_MCP_LOG": "warning",
        "MCP_CONFIRM_ELICITATION": "off",
        "TMPDIR": str(RUNS_TMP),  # runs' directories here: how the suite tells its own processes (harness)
        "MCP_SKILL_RUN": grant,
        "SEC_SERVER_SECRET": SECRET,
        "SEC_GRANTED": GRANTED,
        "SEC_DECLARED_ONLY": "declared-but-not-granted",
        "LD_PRELOAD": "",
        "PYTHONPATH": "/sec-canary-pythonpath",
        "NODE_OPTIONS": "--sec-canary",
        "BASH_ENV": "/sec-canary-bash-env",
        "LANG": "C.UTF-8",
    }
    if account is not None:
        env["SKILL_MCP_SCRIPT_USER"] = account.pw_name
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def server(sec_root: Path) -> Iterator[Session]:
    with open_session(server_params([sec_root], server_env())) as session:
        yield session


@pytest.fixture(scope="session")
def script_uid() -> int | None:
    account = script_account()
    return None if account is None else account.pw_uid


def no_script_processes(uid: int | None, timeout: float = 5.0) -> None:
    """Zero processes of the script uid that this run's servers started remain (bounded wait: a
    SIGKILLed process takes a moment to go). Other processes of the uid are not this test's."""
    if uid is not None:
        wait_until(
            lambda: not procs_of_uid(uid),
            f"every process of uid {uid} this run started to end: {procs_of_uid(uid)}",
            timeout,
        )
        # A killed run's children (a fork bomb's) are zombies until re-parented and reaped, and
        # each holds a slot of the uid's RLIMIT_NPROC the next case's runs need. A zombie has no
        # environment to tell whose it is, so this is a bounded pause, never a verdict: it neither
        # fails nor kills, whoever's zombies they are.
        eventually(lambda: not zombies_of_uid(uid), timeout)


@pytest.fixture(autouse=True)
def after_each(request: pytest.FixtureRequest, script_uid: int | None) -> Iterator[None]:
    yield
    if "server" in request.fixturenames:
        session: Session = request.getfixturevalue("server")
        assert session.answers(), "the server stopped answering after this case"
        no_script_processes(script_uid)
    if "app" in request.fixturenames:
        from tests.security.appliance import SCRIPT_UID

        app_ = request.getfixturevalue("app")
        assert app_.session.answers(), "the appliance server stopped answering after this case"
        wait_until(lambda: not app_.of_uid(SCRIPT_UID), "zero processes of the script uid in the appliance", 5)


# --- the appliance half: the appliance suite's image and peers, reused (tests/appliance/conftest.py) -------------

# The appliance suite's session fixtures, reused rather than building a second image or a second web peer.
image = appliance_conftest.image
peers = appliance_conftest.peers


@pytest.fixture(scope="module")
def rebind_dns(image: str, peers: dict) -> Iterator[dict]:
    """A DNS peer on the test network answering every ``*.example`` name with 127.0.0.1 (logging each query)."""
    from testcontainers.core.container import DockerContainer

    container = (
        DockerContainer(image)
        .with_volume_mapping(str(appliance_conftest.HELPERS), "/helpers", "ro")
        .with_kwargs(entrypoint=["/usr/bin/python3"], network=peers["network"])
        .with_command(["-u", "/helpers/dns_logger.py", "127.0.0.1"])
    )
    try:
        with container:
            appliance_conftest._wait_log(container, "READY")
            yield {"ip": appliance_conftest._ip(container, peers["network"]), "container": container}
    finally:
        container._docker.client.close()  # its pooled socket to the daemon, or pytest reports it unclosed


def rebind_queries(rebind: dict) -> list[str]:
    out, _ = rebind["container"].get_logs()
    return [line.split()[1] for line in out.decode(errors="replace").splitlines() if line.startswith("QUERY ")]


@pytest.fixture(scope="module")
def app(image: str, peers: dict, rebind_dns: dict) -> Iterator:
    from tests.security.appliance import open_appliance

    name = f"skill-mcp-sec-{os.getpid()}-{secrets.token_hex(3)}"
    with open_appliance(image, name, network=peers["network"], dns=rebind_dns["ip"]) as server_:
        yield server_
