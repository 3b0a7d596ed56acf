from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture()
def root() -> Iterator[Path]:
    """A skills root every uid can read: a root test server drops scripts to ``nobody``,
    and pytest's own tmp_path (under a 0700 directory) is not readable by it."""
    path = Path(tempfile.mkdtemp(prefix="skill-mcp-fence-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
