"""Fixtures every suite shares; plain helpers live in ``tests/helpers.py``."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from tests.helpers import ERAS

# Hypothesis profiles: the example count is the profile's, not the test's. ``dev`` (the default
# on a workstation) runs few examples so a property is a quick check while editing; ``ci`` (the
# default when ``CI`` is set) runs many, derandomized so two runs of one commit try the same
# inputs, and prints the blob that reproduces a failure. ``HYPOTHESIS_PROFILE`` picks one
# explicitly. A test keeps its own ``max_examples`` only where a comment beside it says why.
settings.register_profile("dev", max_examples=20, deadline=None)
settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


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
