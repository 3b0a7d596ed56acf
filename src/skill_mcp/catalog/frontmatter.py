"""Split ``SKILL.md`` into frontmatter and body, and parse the frontmatter strictly.

The frontmatter is the text between a first line that is exactly ``---`` and the next line
that is exactly ``---`` (or ``...``), trailing blanks allowed. It is found by delimiter
*lines*, never by substring, so a ``---`` inside a value or a Markdown rule in the body does
not cut it. A UTF-8 BOM and CRLF line ends are tolerated; the text must be UTF-8; the
frontmatter is capped at 64 KiB.

The ``mcp-host:`` block is parsed on its own (``split_host_block``): a syntax error inside it
must cost the skill its scripts, never its instructions, so it cannot be allowed to fail the
parse of the rest of the frontmatter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skill_mcp.limits import READ_CAPS

FRONTMATTER_MAX_BYTES = READ_CAPS.frontmatter
HOST_KEY = "mcp-host"
_BOM = "\ufeff"
_TOP_LEVEL_KEY = re.compile(r"""^(?:"([^"]+)"|'([^']+)'|([^\s#'"\-?:][^:#]*?))\s*:(?:\s|$)""")


class FrontmatterError(ValueError):
    """The frontmatter is missing, unterminated, too large, not UTF-8, or not valid YAML."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(message + where)
        self.message = message
        self.line = line
        self.column = column


class FrontmatterInvalid(FrontmatterError):
    """The frontmatter parses, but is not a mapping JSON can carry."""


@dataclass(frozen=True, slots=True)
class Split:
    frontmatter: str  # the YAML text, LF line ends
    first_line: int  # 1-based line of the first YAML line within SKILL.md
    body: str
    body_offset: int  # byte offset of the body within the raw file


# Lines past this many characters cannot matter: the frontmatter (at most 64 KiB, and a
# character is at least a byte) ends or overflows before them.
_SCAN_CHARS = FRONTMATTER_MAX_BYTES + 4096


def split(raw: bytes) -> Split:
    """Cut ``raw`` (the whole SKILL.md) into frontmatter text and body."""
    offset = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        text = raw[offset:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrontmatterError(f"SKILL.md is not valid UTF-8 (byte {exc.start + offset})") from None
    found = _find_end_fast(text)
    # Cutting only the head into lines (not a 20 KB body) keeps a 10,000-skill scan fast; when
    # the head does not decide, the whole text is cut and the same rules run again.
    if found is None and len(text) > _SCAN_CHARS:
        found = _find_end(text[:_SCAN_CHARS].splitlines(keepends=True)[:-1], complete=False)
    if found is None:
        found = _find_end(text.splitlines(keepends=True), complete=True)
    assert found is not None  # the whole text always decides
    yaml_text, consumed_bytes, consumed_chars = found
    return Split(yaml_text, 2, text[consumed_chars:], offset + consumed_bytes)


# Every line boundary ``str.splitlines`` knows but "\n": text up to the closing line without
# any of them is cut into lines at "\n" alone, so a search can stand in for the cut.
_OTHER_LINE_ENDS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_CLOSING_LINE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)


def _find_end_fast(text: str) -> tuple[str, int, int] | None:
    """``_find_end`` of the whole text for the common shape (a '---' first line, a closing
    line, "\n" line ends only, within the size limit), found by two searches instead of a
    cut into lines; None for anything else, which the cut decides."""
    first_end = text.find("\n")
    if first_end < 0 or text[:first_end].rstrip(" \t") != "---":
        return None
    closing = _closing_line(text, first_end + 1)
    if closing is None:
        return None
    start, end = closing
    head = text[:end]
    if head.isascii():
        # Plain tests first: of the other boundaries, these six are the ASCII ones.
        if "\r" in head or "\v" in head or "\f" in head or "\x1c" in head or "\x1d" in head or "\x1e" in head:
            return None
        consumed = end
    else:
        if _OTHER_LINE_ENDS.search(head):
            return None
        consumed = len(head.encode("utf-8"))
    if consumed > FRONTMATTER_MAX_BYTES and len(text[:start].encode("utf-8")) > FRONTMATTER_MAX_BYTES:
        return None  # over the limit: the cut names the line
    return text[first_end + 1 : start], consumed, end


def _closing_line(text: str, start: int) -> tuple[int, int] | None:
    """(where the first line at or after ``start`` - itself a line start - that is '---' or
    '...' and blanks begins, where the line after it begins), or None. Lines end at "\n" here."""
    if _CLOSING_LINE.match(text, start):
        line_start = start
    else:
        line_start = -1
        limit = len(text)
        for marker in ("\n---", "\n..."):
            # The second marker is looked for only before the first one's line: no body scan.
            at = text.find(marker, start - 1, limit)
            while at >= 0 and not _CLOSING_LINE.match(text, at + 1):
                at = text.find(marker, at + 1, limit)
            if at >= 0:
                line_start, limit = at + 1, at
        if line_start < 0:
            return None
    end = text.find("\n", line_start)
    return line_start, len(text) if end < 0 else end + 1


def _find_end(lines: list[str], *, complete: bool) -> tuple[str, int, int] | None:
    """(YAML text, bytes and characters up to the body) or None when ``lines`` is a head that
    ran out before deciding (``complete`` False); raises when the lines decide a refusal."""
    if not lines and not complete:
        return None
    if not lines or lines[0].rstrip("\r\n").rstrip(" \t") != "---":
        raise FrontmatterError("SKILL.md does not start with a '---' frontmatter line", 1, 1)
    consumed = len(lines[0].encode("utf-8"))
    chars = len(lines[0])
    yaml_lines: list[str] = []
    for index, line in enumerate(lines[1:], start=2):
        stripped = line.rstrip("\r\n").rstrip(" \t")
        consumed += len(line.encode("utf-8"))
        chars += len(line)
        if stripped in ("---", "..."):
            return "".join(yaml_lines), consumed, chars
        if consumed > FRONTMATTER_MAX_BYTES:
            raise FrontmatterError(f"the frontmatter is larger than {FRONTMATTER_MAX_BYTES} bytes", index, 1)
        yaml_lines.append(line.rstrip("\r\n") + "\n")
    if not complete:
        return None
    raise FrontmatterError("the frontmatter has no closing '---' line", len(lines), 1)


@dataclass(frozen=True, slots=True)
class HostChunk:
    text: str  # the block's lines, other lines blanked so positions stay true
    present: bool


def split_host_block(yaml_text: str) -> tuple[str, HostChunk]:
    """Separate the top-level ``mcp-host:`` entry from the rest of the frontmatter.

    Both halves keep every line (the other half's lines replaced by blank lines), so a parser
    position in either half is a position in the original frontmatter.
    """
    if HOST_KEY not in yaml_text:
        # No line can open the block (its key must spell mcp-host): nothing to separate.
        return yaml_text, HostChunk("\n" * yaml_text.count("\n"), False)
    lines = yaml_text.split("\n")
    owner: list[bool] = []
    in_host = False
    for line in lines:
        match = _TOP_LEVEL_KEY.match(line) if line[:1] not in ("", " ", "\t", "#", "-") else None
        if match is not None:
            key = next(group for group in match.groups() if group is not None).strip()
            in_host = key == HOST_KEY
        owner.append(in_host)
    rest = "\n".join("" if mine else line for line, mine in zip(lines, owner, strict=True))
    host = "\n".join(line if mine else "" for line, mine in zip(lines, owner, strict=True))
    return rest, HostChunk(host, any(owner))


def check_json_safe(value: Any, path: str) -> None:
    """The frontmatter is rendered verbatim as JSON: refuse what JSON cannot carry."""
    if not _plainly_json_safe(value):
        _check_json_safe(value, path)


def _plainly_json_safe(value: Any) -> bool:
    """True when ``value`` holds only strings, integers, booleans, None, finite floats, lists and
    dicts keyed by strings (exact types, as the YAML loader builds them): nothing for
    ``_check_json_safe`` to refuse. One loop, no paths built; False sends it the slow way."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is not float or not math.isfinite(item):
            return False
    return True


def _check_json_safe(value: Any, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise FrontmatterInvalid(f"{path} is a non-finite number, which JSON cannot carry")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise FrontmatterInvalid(f"{path} has a non-string key {key!r}")
            _check_json_safe(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json_safe(item, f"{path}[{index}]")


def parse_yaml(text: str, first_line: int) -> Any:
    """Parse YAML text whose first line is line ``first_line`` of SKILL.md."""
    return _parse_composed(text, first_line)[0]


def _parse_composed(text: str, first_line: int) -> tuple[Any, Any]:
    """``parse_yaml``, and the composed node tree when libyaml's fast path read the text."""
    # Imported here, not at the top: PyYAML is a sizeable import, and a server answers the
    # MCP handshake before it scans a single skill (the catalog is built on first use).
    from skill_mcp.catalog import yaml12

    try:
        return yaml12.load_composed(text)
    except yaml12.YamlError as exc:
        line = exc.line + first_line - 1 if exc.line is not None else None
        raise FrontmatterError(exc.message, line, exc.column) from None


def parse_frontmatter(split_result: Split) -> tuple[dict[str, Any], HostChunk]:
    """Parse everything but the ``mcp-host`` block; return the mapping and the raw block."""
    value, host, _ = parse_frontmatter_composed(split_result)
    return value, host


def parse_frontmatter_composed(split_result: Split) -> tuple[dict[str, Any], HostChunk, Any]:
    """``parse_frontmatter``, and the node tree libyaml composed for the *whole* frontmatter
    text (None when a host block was cut out of it, or the fast path did not read it): what
    ``yaml11.differences_composed`` reads the YAML 1.1 way instead of parsing a second time."""
    rest, host = split_host_block(split_result.frontmatter)
    value, node = _parse_composed(rest, split_result.first_line)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise FrontmatterInvalid("the frontmatter is not a mapping of keys to values", split_result.first_line, 1)
    check_json_safe(value, "frontmatter")
    return value, host, node if rest == split_result.frontmatter else None
