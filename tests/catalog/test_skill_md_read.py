"""SKILL.md is read from a bare descriptor (``skill._read_up_to``): the bytes a buffered
``read(limit)`` returns, whatever the first read size (the stat's, or a stale one)."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.catalog.skill import _read_up_to


@given(st.binary(max_size=3000), st.integers(1, 4000), st.integers(1, 4000))
def test_reads_what_a_buffered_read_returns(data: bytes, limit: int, first: int) -> None:
    with tempfile.NamedTemporaryFile() as handle:
        handle.write(data)
        handle.flush()
        with open(handle.name, "rb") as buffered:
            expected = buffered.read(limit)
        fd = os.open(handle.name, os.O_RDONLY)
        try:
            assert _read_up_to(fd, limit, first) == expected
        finally:
            os.close(fd)
