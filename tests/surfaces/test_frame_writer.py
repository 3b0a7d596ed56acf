"""FrameWriter: whole frames from the event loop, on pipes, terminals, sockets and files."""

from __future__ import annotations

import fcntl
import os
import pty
import socket
import sys
import termios
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import anyio
import pytest

from skill_mcp.surfaces.stdio import frame_writer
from skill_mcp.surfaces.stdio.frame_writer import FrameWriter

pytestmark = pytest.mark.anyio


def _frames(count: int, size: int) -> list[str]:
    # Distinct, self-checking frames; multi-byte characters so a split inside one would show.
    return [f'{{"n":{i},"pad":"{("é" + chr(65 + i % 26)) * (size // 3)}"}}\n' for i in range(count)]


@contextmanager
def _piped(reopen: bool) -> Iterator[tuple[int, int, FrameWriter]]:
    """A pipe and a writer on its write end; everything closed afterwards."""
    read_fd, write_fd = os.pipe()
    writer = FrameWriter(write_fd, reopen=reopen)
    try:
        yield read_fd, write_fd, writer
    finally:
        writer.close()
        for fd in (read_fd, write_fd):
            with suppress(OSError):
                os.close(fd)


def _drain(fd: int, want: int, chunk: int = 4096, pause: float = 0.0) -> bytes:
    got = bytearray()
    while len(got) < want:
        data = os.read(fd, chunk)
        if not data:
            break
        got += data
        if pause:
            threading.Event().wait(pause)
    return bytes(got)


@pytest.mark.parametrize("reopen", [True, False], ids=["nonblocking", "pipe-chunks"])
async def test_frames_bigger_than_the_pipe_arrive_whole_and_in_order_while_the_loop_keeps_running(reopen: bool) -> None:
    frames = _frames(6, 300_000)  # each frame is several times a pipe's 64 KiB
    want = sum(len(f.encode()) for f in frames)
    ticks = 0
    result: list[bytes] = []
    with _piped(reopen) as (read_fd, _write_fd, writer):
        assert writer.mode == ("nonblocking" if reopen else "pipe-chunks")
        reader = threading.Thread(target=lambda: result.append(_drain(read_fd, want, pause=0.0005)))
        reader.start()

        async def tick() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.001)
                ticks += 1

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                for frame in frames:
                    await writer.write(frame)
                tg.cancel_scope.cancel()
        await anyio.to_thread.run_sync(reader.join, 30)
    assert result and result[0].decode() == "".join(frames)
    # The slow reader made the writer wait many times; the loop ran other work meanwhile.
    assert ticks > 10


@pytest.mark.parametrize("reopen", [True, False], ids=["nonblocking", "pipe-chunks"])
async def test_the_wire_itself_is_left_blocking(reopen: bool) -> None:
    # The wire's open file description may be shared (a shell, a terminal): only our own
    # description of it becomes non-blocking.
    with _piped(reopen) as (read_fd, write_fd, writer):
        await writer.write("{}\n")
        assert os.read(read_fd, 16) == b"{}\n"
        assert not fcntl.fcntl(write_fd, fcntl.F_GETFL) & os.O_NONBLOCK


async def test_a_terminal_is_written_through_its_own_description() -> None:
    controller, terminal = pty.openpty()
    writer = FrameWriter(terminal)
    try:
        assert writer.mode == "nonblocking"
        await writer.write('{"a":1}\n')
        got = b""
        with anyio.fail_after(10):
            while not got.endswith(b"\n"):
                await anyio.wait_readable(controller)
                got += os.read(controller, 1024)
        assert got.replace(b"\r\n", b"\n") == b'{"a":1}\n'
        assert not fcntl.fcntl(terminal, fcntl.F_GETFL) & os.O_NONBLOCK
    finally:
        writer.close()
        os.close(terminal)
        os.close(controller)


async def test_a_socket_gets_whole_frames_and_keeps_its_blocking_mode() -> None:
    ours, peer = socket.socketpair()
    frames = _frames(3, 400_000)
    want = sum(len(f.encode()) for f in frames)
    writer = FrameWriter(ours.fileno())
    result: list[bytes] = []
    try:
        assert writer.mode == "socket"
        reader = threading.Thread(target=lambda: result.append(_drain(peer.fileno(), want)))
        reader.start()
        with anyio.fail_after(60):
            for frame in frames:
                await writer.write(frame)
        await anyio.to_thread.run_sync(reader.join, 30)
        assert ours.getblocking()
    finally:
        writer.close()
        ours.close()
        peer.close()
    assert result and result[0].decode() == "".join(frames)


async def test_a_regular_file_is_written_by_a_worker_thread(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    frames = _frames(4, 100_000)
    writer = FrameWriter(fd)
    try:
        assert writer.mode == "thread"
        for frame in frames:
            await writer.write(frame)
    finally:
        writer.close()
        os.close(fd)
    assert out.read_text(encoding="utf-8") == "".join(frames)


@pytest.mark.parametrize("reopen", [True, False], ids=["nonblocking", "pipe-chunks"])
async def test_a_reader_that_went_away_is_an_error_not_a_hang(reopen: bool) -> None:
    with _piped(reopen) as (read_fd, _write_fd, writer):
        os.close(read_fd)
        with anyio.fail_after(10), pytest.raises(BrokenPipeError):
            await writer.write("x" * 200_000 + "\n")


@pytest.mark.parametrize("reopen", [True, False], ids=["nonblocking", "pipe-chunks"])
async def test_a_client_that_never_reads_cannot_hold_up_shutdown(
    reopen: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(frame_writer, "FINISH_FRAME_S", 0.5)
    with _piped(reopen) as (read_fd, _write_fd, writer):
        started = time.monotonic()
        with anyio.move_on_after(0.3) as scope:
            await writer.write("y" * 1_000_000 + "\n")
        # The pipe filled and nobody read: the cancellation, then the bound on finishing the frame
        # already begun, end the wait; the shortfall is logged.
        assert scope.cancelled_caught
        assert time.monotonic() - started < 0.3 + 0.5 + 2.0
        assert "a frame was left unfinished at shutdown" in caplog.text
        # Positive control: the part that fit was written.
        assert os.read(read_fd, 4) == b"yyyy"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user in a child")
def test_a_pipe_of_another_user_is_written_in_chunks_after_the_uid_drop() -> None:
    # What the appliance meets: docker's pipes belong to root, the server runs as its own uid
    # and cannot open them again through /proc, so it writes the pipe in poll-checked chunks.
    read_fd, write_fd = os.pipe()  # mode 0600, owned by root
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            writer = FrameWriter(write_fd)
            os.write(report_w, writer.mode.encode())
            anyio.run(writer.write, "z" * 150000 + "\n")
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    os.close(report_w)
    try:
        got = _drain(read_fd, 150001)
        mode = os.read(report_r, 64).decode()
    finally:
        os.close(read_fd)
        os.close(report_r)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert mode == "pipe-chunks"
    assert got == b"z" * 150000 + b"\n"


def _queued(fd: int) -> int:
    """How many bytes wait unread in the pipe behind ``fd``."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


def _fill(fd: int) -> int:
    """Fill the pipe behind ``fd`` to the brim (through a private non-blocking description)."""
    nb = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
    total = 0
    try:
        while True:
            try:
                total += os.write(nb, b"f" * 4096)
            except BlockingIOError:
                return total
    finally:
        os.close(nb)


@pytest.mark.parametrize("reopen", [True, False], ids=["nonblocking", "pipe-chunks"])
async def test_a_frame_begun_when_shutdown_cancels_the_writer_is_finished_whole(
    reopen: bool, caplog: pytest.LogCaptureFixture
) -> None:
    frame = "{" + "q" * 300_000 + "}\n"  # far more than the pipe holds: the writer must wait
    result: list[bytes] = []
    with _piped(reopen) as (read_fd, _write_fd, writer):
        reader = threading.Thread(target=lambda: result.append(_drain(read_fd, len(frame))))
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer.write, frame)
                await anyio.wait_all_tasks_blocked()  # the writer filled the pipe and waits for room
                assert _queued(read_fd) > 0  # part of the frame is on the wire: it has begun
                tg.cancel_scope.cancel()  # shutdown, with nobody reading yet
                reader.start()  # the client reads on
        await anyio.to_thread.run_sync(reader.join, 30)
    assert result and result[0].decode() == frame  # the whole frame, not a torn one
    assert "a frame was left unfinished" not in caplog.text  # finished because it was read, not by the bound


@pytest.mark.parametrize("reopen", [True, False], ids=["nonblocking", "pipe-chunks"])
async def test_a_frame_not_begun_when_shutdown_cancels_the_writer_is_dropped(reopen: bool) -> None:
    with _piped(reopen) as (read_fd, write_fd, writer):
        filler = _fill(write_fd)  # a full pipe: not one byte of the next frame fits
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer.write, '{"late":1}\n')
                await anyio.wait_all_tasks_blocked()  # the writer found no room and waits for it
                tg.cancel_scope.cancel()
        got = _drain(read_fd, filler)
        os.set_blocking(read_fd, False)
        with pytest.raises(BlockingIOError):
            os.read(read_fd, 1)  # and nothing after the filler: the frame never started
    assert got == b"f" * filler


async def test_the_thread_mode_waits_when_someone_made_the_wire_non_blocking() -> None:
    # A wire that is neither a socket nor a pipe it may reopen goes to a worker thread; if its
    # description was made non-blocking by someone else, the thread waits for room instead of
    # failing. (A pipe with reopening refused and no poll stands in for such a wire here.)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    frame = b"t" * 300_000 + b"\n"
    result: list[bytes] = []
    try:
        reader = threading.Thread(target=lambda: result.append(_drain(read_fd, len(frame), pause=0.0005)))
        reader.start()
        await anyio.to_thread.run_sync(frame_writer._write_all, write_fd, memoryview(frame))
        await anyio.to_thread.run_sync(reader.join, 30)
    finally:
        os.close(write_fd)
        os.close(read_fd)
    assert result == [frame]
