"""Fixtures for driving the real server subprocess over stdio with the SDK's own client."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration import harness
from tests.integration.harness import ERAS, Connect, build_tree


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=("stdio", "http"))
def connect(request: pytest.FixtureRequest) -> Connect:
    """Open an SDK client on a freshly started server subprocess, over each transport in turn."""
    if request.param == "stdio":
        return harness.connect
    from tests.http.harness import http_connect

    return http_connect


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    return build_tree(tmp_path / "skills")
