"""Opaque cursors for every paginated surface.

A cursor is ``base64url("<kind>:<offset>")``. The kind keeps a cursor from one list from being
replayed against another. Offsets index the catalog's sorted order; a catalog swapped between
two pages can shift an entry by one page, which pagination over a live listing allows.
"""

from __future__ import annotations

import base64
import binascii

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal

MAX_CURSOR_CHARS = 128


def encode_cursor(kind: str, offset: int) -> str:
    raw = f"{kind}:{offset}".encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(kind: str, cursor: str | None) -> int:
    """Return the offset a cursor stands for (0 for no cursor); refuse anything else."""
    if cursor is None or cursor == "":
        return 0
    bad = SkillMcpError(Refusal.INVALID_ARGUMENTS, "the cursor is not one this server issued for this list",
                        {"cursor": cursor[:MAX_CURSOR_CHARS]})
    if len(cursor) > MAX_CURSOR_CHARS:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad from None
    got_kind, sep, offset = raw.rpartition(":")
    if not sep or got_kind != kind or not offset.isdigit():
        raise bad
    return int(offset)


def page(total: int, offset: int, limit: int) -> tuple[int, int, int | None]:
    """``(start, stop, next_offset)`` for one page; ``next_offset`` is None on the last page."""
    start = min(offset, total)
    stop = min(start + limit, total)
    return start, stop, (stop if stop < total else None)
