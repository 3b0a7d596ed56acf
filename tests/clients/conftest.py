"""A venv per third-party client, made once and kept under ``.client-venv/`` (git-ignored).

Each client runs as a separate process from a venv of its own (``fastmcp.txt``,
``langchain.txt``), the way its users run it: langchain-mcp-adapters 0.3 needs the 1.x SDK,
which conflicts with the 2.x ``mcp`` the server pins, and both clients bring dependencies the
server never needs, so none of them is in the dev extras. A venv's directory is named after its
requirements file and that file's SHA-256, so a changed pin makes a new one. Making one needs
the package index (a minute or two, once); without it the tests skip locally and fail under CI.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
INSTALL_TIMEOUT = 900


def client_venv(name: str) -> Path:
    """The interpreter of the venv made from ``tests/clients/<name>.txt`` (made if missing)."""
    requirements = HERE / f"{name}.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    venv = REPO / ".client-venv" / f"{name}-{digest}"
    python = venv / "bin" / "python"
    ready = venv / ".ready"
    if not ready.exists():
        try:
            subprocess.run(
                [sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120, capture_output=True
            )
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "-r", str(requirements)],
                check=True,
                timeout=INSTALL_TIMEOUT,
                capture_output=True,
                text=True,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
            detail = getattr(err, "stderr", "") or ""
            message = f"could not make the client venv ({venv}): {str(detail)[-1500:]}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        ready.write_text("ok\n", encoding="ascii")
    return python


@pytest.fixture(scope="session")
def fastmcp_python() -> Path:
    return client_venv("fastmcp")


@pytest.fixture(scope="session")
def langchain_python() -> Path:
    return client_venv("langchain")
