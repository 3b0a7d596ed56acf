"""``frontmatter.split`` as it was before its fast path: the reference the differential test
holds the fast path to (same Split, or the same refusal at the same line)."""

from __future__ import annotations

from skill_mcp.catalog.frontmatter import FRONTMATTER_MAX_BYTES, FrontmatterError, Split

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
    # Cutting only the head into lines (not a 20 KB body) keeps a 10,000-skill scan fast; when
    # the head does not decide, the whole text is cut and the same rules run again.
    found = None
    if len(text) > _SCAN_CHARS:
        found = _find_end(text[:_SCAN_CHARS].splitlines(keepends=True)[:-1], complete=False)
    if found is None:
        found = _find_end(text.splitlines(keepends=True), complete=True)
    assert found is not None  # the whole text always decides
    yaml_text, consumed_bytes, consumed_chars = found
    return Split(yaml_text, 2, text[consumed_chars:], offset + consumed_bytes)


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
