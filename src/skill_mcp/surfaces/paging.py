"""Every paginated answer's page size, cursor and window, in one place.

Five lists page: the ``skill_list`` tool, ``skills/list`` (the Skills extension),
``resources/list``, ``prompts/list`` and a directory resource's listing. Each takes its page
size from here and cuts its page with ``window`` (a list in hand) or ``stream_window`` (a
generator not worth materialising). ``skill_search`` is not paged: its ``limit`` caps the
hits of one ranking (``surfaces.search_tool``).

A cursor is ``base64url("<kind>:<offset>")``. The kind keeps a cursor from one list from being
replayed against another. Offsets index the catalog's sorted order; a catalog swapped between
two pages can shift an entry by one page, which pagination over a live listing allows.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import TypeVar

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal

T = TypeVar("T")

MAX_CURSOR_CHARS = 128

# skill_list: the default page is the size of a skills/list page; 25 compact entries cost a
# model about 1,500-3,000 tokens. A caller that wants more at once asks for up to the maximum.
DEFAULT_LIST_LIMIT = 25
MAX_LIST_LIMIT = 200
# A skill_list page without an explicit limit also stops before it passes this many bytes of
# answer (the text block the model reads plus structuredContent, both counted: a client may
# pass both on). Descriptions run to 1,024 characters, so 25 of them could cost a model 50 KB;
# the public collections' pages were 17-19 KB. An explicit limit is honoured as asked.
LIST_PAGE_BYTES = 14 * 1024
# skill_list's first page lists the problems: at most this many (errors before warnings when
# some must be left out), so that a root of 20,000 directories without a SKILL.md answers a page
# and not 5 MB; problemCount counts them all, and ``skill-mcp validate`` lists them all.
MAX_PROBLEMS_LISTED = 50
# skills/list: every entry carries each of its files' digests, so a page bounds the hashing
# one call may do.
SKILLS_PAGE = 25
RESOURCES_PAGE = 100  # resources/list: one entry per file, small
# prompts/list: a name and a description (up to 1,024 characters) per skill; 50 keep a page under
# 64 KB, so a client that follows every cursor pulls the catalog in small steps.
PROMPTS_PAGE = 50
DIRECTORY_PAGE = 200  # a directory resource's children: names and URIs only


def encode_cursor(kind: str, offset: int) -> str:
    raw = f"{kind}:{offset}".encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(kind: str, cursor: str | None) -> int:
    """Return the offset a cursor stands for (0 for no cursor); refuse anything else."""
    if cursor is None or cursor == "":
        return 0
    bad = SkillMcpError(
        Refusal.INVALID_ARGUMENTS,
        "the cursor is not one this server issued for this list",
        {"cursor": cursor[:MAX_CURSOR_CHARS]},
    )
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


def fit(base: int, costs: Iterable[int], budget: int) -> int:
    """How many of the leading items fit in ``budget`` beside ``base`` bytes; at least one, so a
    page always makes progress."""
    used, count = base, 0
    for cost in costs:
        used += cost
        if used > budget and count:
            break
        count += 1
    return count


def window(items: Sequence[T], offset: int, limit: int) -> tuple[Sequence[T], int | None]:
    """One page of ``items`` from ``offset`` and the offset of the next page (None on the last)."""
    start, stop, nxt = page(len(items), offset, limit)
    return items[start:stop], nxt


def stream_window(items: Iterable[T], offset: int, limit: int) -> tuple[list[T], int | None]:
    """``window`` over an iterable whose length is unknown: reads at most ``offset + limit + 1`` items."""
    got = list(islice(items, offset, offset + limit + 1))
    return got[:limit], (offset + limit if len(got) > limit else None)
