"""What every test suite needs and once wrote for itself: a skill on disk, a wait for a state.

Suites import these by name (``from tests.helpers import write_skill, wait_until``) rather than
through a conftest fixture, so a helper module of a suite (``tests/fence/helpers.py`` and the
like) can use them too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mcp_types

# The two handshake eras every surface serves: the pre-2026 initialize exchange and the
# 2026-07-28 stateless one. A test that takes the ``era`` fixture runs under each.
ERAS = ("legacy", "2026-07-28")


def write_skill(
    root: Path,
    name: str,
    *,
    description: str | None = None,
    body: str | None = None,
    extra: str = "",
    atomic: bool = False,
) -> Path:
    """Write ``root/name/SKILL.md`` with a valid front matter; return the skill's directory.

    ``extra`` is more front-matter lines (each ending in a newline). ``atomic`` writes under a
    temporary name and renames, as an editor or a copy tool finishes a file, so a watcher never
    reads half of one.
    """
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    description = f"{name} helps. Use when asked." if description is None else description
    body = f"# {name}\n" if body is None else body
    text = f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}"
    target = directory / "SKILL.md"
    if atomic:
        tmp = directory / ".SKILL.md.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.rename(target)
    else:
        target.write_text(text, encoding="utf-8")
    return directory


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie. Any error reading its ``/proc`` entry
    means it is gone: the entry can vanish between the open and the read (``ESRCH``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def pids_with(marker: str) -> list[int]:
    """Every process with ``marker`` as one of its arguments, found in /proc without the
    server's cooperation (a test passes a marker unique to it to a script it runs)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline.split(b"\0"):
            found.append(int(entry))
    return found


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 10.0, interval: float = 0.02) -> None:
    """Poll ``predicate`` until it holds; fail the test naming ``what`` if ``timeout`` passes first.

    For a state another process or thread reaches in its own time: a test waits for the state,
    never for a fixed sleep that is too short on a loaded machine and wasted on an idle one.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def eventually(predicate: Callable[[], object], timeout: float = 10.0) -> bool:
    """Whether ``predicate`` came to hold within ``timeout`` (for a test that must clean up first)."""
    try:
        wait_until(predicate, "a condition", timeout)
    except AssertionError:
        return False
    return True


def text_of(block: object) -> str:
    """The text a content block or a read resource carries: a ``TextContent``'s, an embedded text
    resource's, or a ``TextResourceContents``'. Any other kind fails the test here, by name."""
    import mcp_types as types

    if isinstance(block, types.EmbeddedResource):
        block = block.resource
    assert isinstance(block, types.TextContent | types.TextResourceContents), f"not a text block: {block!r}"
    return block.text


def embedded(block: object) -> mcp_types.TextResourceContents | mcp_types.BlobResourceContents:
    """The resource an ``EmbeddedResource`` block carries (a test fails here on any other kind)."""
    import mcp_types as types

    assert isinstance(block, types.EmbeddedResource), f"not an embedded resource: {block!r}"
    return block.resource


def blob_of(contents: object) -> str:
    """The base64 body of a ``BlobResourceContents`` (a test fails here on any other kind)."""
    import mcp_types as types

    assert isinstance(contents, types.BlobResourceContents), f"not a blob: {contents!r}"
    return contents.blob
