"""A run's output directory is read by descriptor: only what the script wrote there, within caps.

Each attack leaves a legitimate file beside it (the positive control): the walk keeps that one
and drops the rest with its reason.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skill_mcp import outputs
from skill_mcp.outputs import Collected, collect, from_wire, to_wire


def _out(tmp_path: Path) -> Path:
    out = tmp_path / "run" / "out"
    out.mkdir(parents=True)
    (out / "report.md").write_text("# report\n", encoding="utf-8")
    return out


def _kept(c: Collected) -> set[str]:
    return {f.path for f in c.files}


def _why(c: Collected) -> dict[str, str]:
    return {d.path: d.why for d in c.dropped}


def test_text_binary_and_nested_files_are_kept_with_their_digests(tmp_path: Path) -> None:
    out = _out(tmp_path)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (out / "img.png").write_bytes(png)
    (out / "sub" / "deeper").mkdir(parents=True)
    (out / "sub" / "deeper" / "data.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    got = collect(str(out))
    assert _kept(got) == {"report.md", "img.png", "sub/deeper/data.csv"}
    by = {f.path: f for f in got.files}
    assert by["img.png"].data == png and by["img.png"].sha256 == hashlib.sha256(png).hexdigest()
    assert got.dropped == () and got.complete


def test_collect_cannot_be_made_to_follow_a_link_to_proc_1_environ(tmp_path: Path) -> None:
    out = _out(tmp_path)
    (out / "environ").symlink_to("/proc/1/environ")
    (out / "dir").symlink_to("/proc/1")
    got = collect(str(out))
    assert _kept(got) == {"report.md"}
    assert _why(got) == {"environ": outputs.LINK, "dir": outputs.LINK}


def test_collect_cannot_be_made_to_read_another_runs_directory(tmp_path: Path) -> None:
    out = _out(tmp_path)
    other = tmp_path / "other-run"
    other.mkdir()
    (other / "secret").write_text("the other run's key", encoding="utf-8")
    (out / "theirs").symlink_to(other)
    (out / "key").symlink_to(other / "secret")
    got = collect(str(out))
    assert _kept(got) == {"report.md"}
    assert all(f.data != b"the other run's key" for f in got.files)


def test_collect_refuses_a_hard_link_to_a_file_written_elsewhere(tmp_path: Path) -> None:
    out = _out(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not the script's to hand over", encoding="utf-8")
    os.link(elsewhere, out / "linked")
    got = collect(str(out))
    assert _kept(got) == {"report.md"} and _why(got) == {"linked": outputs.HARD_LINK}


def test_collect_never_blocks_on_a_fifo_or_reads_a_socket(tmp_path: Path) -> None:
    import socket

    out = _out(tmp_path)
    os.mkfifo(out / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(out / "sock"))
    try:
        got = collect(str(out))
    finally:
        sock.close()
    assert _kept(got) == {"report.md"}
    assert _why(got) == {"pipe": outputs.SPECIAL, "sock": outputs.SPECIAL}


def test_collect_drops_a_file_growing_while_it_is_read(tmp_path: Path) -> None:
    out = _out(tmp_path)
    grower = out / "grows.log"
    grower.write_bytes(b"x" * (8 << 20))
    stop = threading.Event()

    def grow() -> None:
        with open(grower, "ab") as fh:
            while not stop.is_set():
                fh.write(b"y" * 65536)
                fh.flush()

    t = threading.Thread(target=grow)
    t.start()
    try:
        time.sleep(0.05)
        got = collect(str(out))
    finally:
        stop.set()
        t.join()
    assert "report.md" in _kept(got)
    assert "grows.log" not in _kept(got)
    assert _why(got)["grows.log"] in (outputs.CHANGED, outputs.TOO_BIG)


@pytest.mark.slow
def test_ten_thousand_tiny_files_keep_64_and_count_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for i in range(10_000):
        (out / f"f{i:05d}.txt").write_bytes(b"%d" % i)
    got = collect(str(out))
    assert len(got.files) == outputs.MAX_OUTPUT_FILES
    assert got.dropped_count == 10_000 - outputs.MAX_OUTPUT_FILES
    assert len(got.dropped) == outputs.MAX_DROPPED_LISTED
    assert {d.why for d in got.dropped} == {outputs.TOO_MANY}


def test_byte_cap_drops_what_does_not_fit_and_keeps_what_does(tmp_path: Path) -> None:
    out = _out(tmp_path)
    (out / "big.bin").write_bytes(b"\0" * (outputs.MAX_OUTPUT_BYTES + 1))
    got = collect(str(out))
    assert _kept(got) == {"report.md"} and _why(got) == {"big.bin": outputs.TOO_BIG}
    assert got.total_bytes <= outputs.MAX_OUTPUT_BYTES


@pytest.mark.parametrize("name", ["..x\\y", "a%2e", "tab\tname", "bell\x07", "back\\slash"])
def test_names_the_read_tools_cannot_address_are_dropped(tmp_path: Path, name: str) -> None:
    out = _out(tmp_path)
    (out / name).write_text("odd", encoding="utf-8")
    got = collect(str(out))
    assert _kept(got) == {"report.md"} and _why(got) == {name: outputs.NAME}


def test_undecodable_bytes_in_a_name_are_dropped(tmp_path: Path) -> None:
    out = _out(tmp_path)
    with open(os.path.join(os.fsencode(out), b"caf\xe9.txt"), "wb") as fh:
        fh.write(b"latin-1 name")
    got = collect(str(out))
    assert _kept(got) == {"report.md"} and _why(got) == {"caf\\xe9.txt": outputs.NAME}
    import json

    json.dumps(to_wire(got), ensure_ascii=False).encode("utf-8")  # the reply frame can carry it


def test_a_path_4_kib_long_is_dropped_and_a_deep_tree_stops_the_walk(tmp_path: Path) -> None:
    out = _out(tmp_path)
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(40):  # 40 * 101 characters, made by descriptor as a script would
            os.mkdir("d" * 100, dir_fd=fd)
            nxt = os.open("d" * 100, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(leaf, b"deep")
        os.close(leaf)
    finally:
        os.close(fd)
    got = collect(str(out))
    assert _kept(got) == {"report.md"}
    assert got.dropped_count >= 1


def test_missing_or_linked_output_directory_yields_nothing(tmp_path: Path) -> None:
    assert collect(str(tmp_path / "nope")) == Collected()
    real = _out(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert collect(str(link)) == Collected()
    assert _kept(collect(str(real))) == {"report.md"}  # positive control


def test_files_of_another_owner_are_not_kept_when_an_owner_is_named(tmp_path: Path) -> None:
    out = _out(tmp_path)
    mine = os.getuid()
    assert _kept(collect(str(out), uid=mine)) == {"report.md"}
    assert _kept(collect(str(out), uid=mine + 1)) == set()


_NAMES = st.text(alphabet="abcdefgh.-_", min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))


# 40, whatever the profile: each example writes a directory of files and collects it from disk.
@settings(max_examples=40, deadline=None)
@given(st.dictionaries(_NAMES, st.binary(max_size=64), max_size=12))
def test_the_wire_form_gives_back_what_was_collected(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, bytes]
) -> None:
    out = tmp_path_factory.mktemp("wire")
    for name, data in files.items():
        (out / name).write_bytes(data)
    got = collect(str(out))
    assert from_wire(to_wire(got)) == got


def test_the_wire_form_refuses_a_forged_digest_a_bad_name_and_excess(tmp_path: Path) -> None:
    got = collect(str(_out(tmp_path)))
    wire = to_wire(got)
    forged = {**wire, "files": [{**wire["files"][0], "sha256": "0" * 64}]}
    assert from_wire(forged).files == () and from_wire(forged).dropped_count == 1
    bad = {**wire, "files": [{**wire["files"][0], "path": "../etc/passwd"}]}
    assert from_wire(bad).files == ()
    many = {**wire, "files": wire["files"] * (outputs.MAX_OUTPUT_FILES + 1)}
    assert len(from_wire(many).files) == outputs.MAX_OUTPUT_FILES
    assert from_wire("not a dict") == Collected()
