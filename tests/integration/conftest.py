"""Fixtures for driving the real server subprocess over stdio with the SDK's own client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.helpers import ERAS
from tests.integration import harness
from tests.integration.harness import Connect, Wire, build_tree

WIRES = [(transport, era) for transport in ("stdio", "http") for era in ERAS]


def _opener(transport: str) -> Connect:
    if transport == "stdio":
        return harness.connect
    from tests.http.harness import http_connect

    return http_connect


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tree(tmp_path_factory.mktemp("shared") / "skills")


@pytest.fixture(scope="module", params=WIRES, ids=[f"{t}-{e}" for t, e in WIRES])
async def wire(request: pytest.FixtureRequest, shared_root: Path) -> AsyncIterator[Wire]:
    """One server per transport and era, shared by a module's tests (they only read)."""
    transport, era = request.param
    async with _opener(transport)(shared_root, era) as client:
        yield Wire(client, era, transport, shared_root)


@pytest.fixture(params=("stdio", "http"))
def connect(request: pytest.FixtureRequest) -> Connect:
    """Open an SDK client on a freshly started server subprocess, over each transport in turn."""
    return _opener(str(request.param))


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    return build_tree(tmp_path / "skills")
