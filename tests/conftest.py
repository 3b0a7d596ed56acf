"""Fixtures every suite shares; plain helpers live in ``tests/helpers.py``."""

from __future__ import annotations

import pytest

from tests.helpers import ERAS


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Every async test and fixture runs on asyncio, the loop the server itself runs on.

    Module scope, as anyio's own default, so a module-scoped async fixture (a server shared by a
    module's tests) can use it too.
    """
    return "asyncio"


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    """The handshake era a test's client speaks; the test runs once for each."""
    return str(request.param)
