"""Fixtures every suite shares; plain helpers live in ``tests/helpers.py``."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Every async test and fixture runs on asyncio, the loop the server itself runs on.

    Module scope, as anyio's own default, so a module-scoped async fixture (a server shared by a
    module's tests) can use it too.
    """
    return "asyncio"
