"""Pure pieces of the surfaces: cursors, URIs, content encoding, parse-error replies, log lines."""

from __future__ import annotations

import base64
import io
import json
import logging

import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.catalog.files import skill_uri
from skill_mcp.errors import SkillMcpError
from skill_mcp.logs import JsonLineFormatter, configure_logging
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.content import encode, guess_mime
from skill_mcp.surfaces.paging import decode_cursor, encode_cursor, page, stream_window, window
from skill_mcp.surfaces.resources import parse_skill_uri
from skill_mcp.surfaces.stdio.unparseable import reply_for


@given(st.sampled_from(["skills", "resources", "skill_list"]), st.integers(min_value=0, max_value=10**9))
def test_a_cursor_round_trips_to_its_offset(kind: str, offset: int) -> None:
    assert decode_cursor(kind, encode_cursor(kind, offset)) == offset


@pytest.mark.parametrize(
    "cursor",
    ["%%%", "bm9wZQ", encode_cursor("resources", 3), "A" * 500, base64.urlsafe_b64encode(b"skills:-1").decode()],
)
def test_a_foreign_or_forged_cursor_is_refused_as_invalid_arguments(cursor: str) -> None:
    with pytest.raises(SkillMcpError) as err:
        decode_cursor("skills", cursor)
    assert err.value.reason is Refusal.INVALID_ARGUMENTS


def test_no_cursor_means_the_first_page() -> None:
    assert decode_cursor("skills", None) == 0 and decode_cursor("skills", "") == 0


@pytest.mark.parametrize(
    ("total", "offset", "limit", "expected"),
    [
        (10, 0, 4, (0, 4, 4)),
        (10, 8, 4, (8, 10, None)),
        (10, 12, 4, (10, 10, None)),
        (0, 0, 4, (0, 0, None)),
    ],
)
def test_page_bounds(total: int, offset: int, limit: int, expected: tuple[int, int, int | None]) -> None:
    assert page(total, offset, limit) == expected


@given(
    st.integers(min_value=0, max_value=30),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=1, max_value=12),
)
def test_a_streamed_page_is_the_page_of_the_whole_list(total: int, offset: int, limit: int) -> None:
    # resources/list pages a generator; the other pagers slice a list: both cut the same page.
    items = list(range(total))
    shown, nxt = window(items, offset, limit)
    assert stream_window(iter(items), offset, limit) == (list(shown), nxt)
    assert nxt is None or (nxt == offset + limit < total)


@given(
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True),
    st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\%"), min_size=1, max_size=8),
        min_size=1,
        max_size=4,
    ),
)
def test_skill_uris_parse_back_to_what_built_them(name: str, segments: list[str]) -> None:
    rel = "/".join(segments)
    assert parse_skill_uri(skill_uri(name, rel)) == f"{name}/{rel}"
    assert parse_skill_uri(skill_uri(name)) == name


@pytest.mark.parametrize(
    "uri",
    [
        "file:///etc/passwd",
        "skill://",
        "skill:///x",
        "skill://a/",
        "skill://a/b?x=1",
        "skill://a/b#frag",
        "skill://a/%ff",
    ],
)
def test_uris_that_are_not_skill_uris_do_not_parse(uri: str) -> None:
    assert parse_skill_uri(uri) is None


def test_text_stays_text_and_anything_else_is_base64_with_a_mime_type() -> None:
    assert encode("a.md", "# Hi ü\n".encode()).text == "# Hi ü\n"
    png = encode("logo.png", b"\x89PNG\x00\x01")
    assert (png.mime_type, png.encoding) == ("image/png", "base64")
    assert png.blob is not None and base64.b64decode(png.blob) == b"\x89PNG\x00\x01"
    assert encode("notes.txt", b"nul\x00inside").encoding == "base64"
    assert encode("latin1.txt", b"caf\xe9").encoding == "base64"
    assert encode("noext", b"plain").mime_type == "text/plain"
    assert encode("noext", b"\x00").mime_type == "application/octet-stream"
    assert guess_mime("SKILL.md") == "text/markdown" and guess_mime("x.py") == "text/x-python"


def _validation_error(line: str) -> Exception:
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:
        return exc
    raise AssertionError("the line validated")


@pytest.mark.parametrize(
    ("line", "code", "rid"),
    [
        ("not json", -32700, None),
        ('{"a": 1', -32700, None),
        ('{"foo": 1}', -32600, None),
        ("[1, 2]", -32600, None),
        ('{"jsonrpc": "2.0", "id": 9, "method": 5}', -32600, 9),
        ('{"jsonrpc": "2.0", "id": "x", "method": null}', -32600, "x"),
        ('{"jsonrpc": "2.0", "id": true, "method": 5}', -32600, None),
    ],
)
def test_unparseable_lines_get_the_json_rpc_error_they_deserve(line: str, code: int, rid: object) -> None:
    reply = reply_for(_validation_error(line))
    assert reply is not None and reply.error.code == code and reply.id == rid
    wire = json.loads(reply.model_dump_json(by_alias=True, exclude_unset=True))
    assert wire["id"] == rid and wire["jsonrpc"] == "2.0"


def test_a_blank_line_is_not_answered() -> None:
    assert reply_for(_validation_error("\n")) is None
    assert reply_for(_validation_error("   ")) is None


def test_log_records_are_single_json_lines_with_extra_fields() -> None:
    record = logging.LogRecord("skill_mcp.x", logging.WARNING, __file__, 1, "two\nlines %s", ("here",), None)
    record.skill = "alpha"
    line = JsonLineFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["msg"] == "two\nlines here" and parsed["skill"] == "alpha" and parsed["level"] == "warning"


def test_configure_logging_writes_json_to_the_given_stream_and_replaces_its_own_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        configure_logging("info", first)
        configure_logging("info", second)
        logging.getLogger("skill_mcp.test").info("hello", extra={"n": 1})
        assert first.getvalue() == ""
        assert json.loads(second.getvalue())["n"] == 1
    finally:
        for handler in list(root.handlers):
            if handler not in before:
                root.removeHandler(handler)


@given(
    st.lists(
        st.text(alphabet="ab.c-_ ", min_size=1, max_size=10).filter(lambda s: s not in (".", "..")),
        min_size=1,
        max_size=4,
    )
)
def test_guess_mime_reads_the_suffix_as_pathlib_does(segments: list[str]) -> None:
    from pathlib import PurePosixPath

    from skill_mcp.surfaces.content import _suffix

    rel = "/".join(segments)
    assert _suffix(rel.rpartition("/")[2]) == PurePosixPath(rel).suffix
    assert guess_mime(rel + ".MD") == "text/markdown"  # suffixes compare case-insensitively
