"""The plain-TCP send queue: sendfile resumed after partial sends and EAGAIN, order with bytes parts,
backpressure, a close or a failure mid-send, and the copy fallback. A real socket pair with small kernel
buffers, so the socket really fills up. Every test runs twice: regions by sendfile alone, and regions
spliced through pipes of a small pool (64 KiB pipes, so a region takes several fills); the splice run
also checks that every pipe came back to the pool or was closed."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker import send_queue as writer_module
from pybroker.broker.send_queue import SendQueue
from pybroker.broker.splice_pipes import PipePool
from pybroker.storage.log import FileRegion
from pybroker.storage.page_cache import PageCache

BUFFER = 16 * 1024


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    for sock in (ours, peer):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
    ours.setblocking(False)
    peer.setblocking(False)
    yield ours, peer
    ours.close()
    peer.close()


@pytest.fixture(params=["sendfile", "splice"], autouse=True)
def pipes(request: pytest.FixtureRequest) -> Iterator[PipePool | None]:
    """The pool `make_queue` hands its queues: none (sendfile only), or a small one of 64 KiB pipes."""
    global _PIPES
    pool = PipePool(max_pipes=4, size=64 * 1024) if request.param == "splice" else None
    _PIPES = pool
    yield pool
    _PIPES = None
    if pool is not None:
        pool.close()
        assert pool.open_pipes == 0, "a queue kept a pipe after it was closed, or lost one"


_PIPES: PipePool | None = None


@pytest.fixture
def data_file(tmp_path: Path) -> Iterator[Any]:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(1 << 20))
    with open(path, "rb", buffering=0) as file:
        yield file


class Events:
    def __init__(self) -> None:
        self.paused = 0
        self.resumed = 0
        self.errors: list[BaseException] = []


def make_queue(sock: socket.socket, events: Events, **limits: Any) -> SendQueue:
    limits.setdefault("pipes", _PIPES)
    return SendQueue(sock.fileno(), asyncio.get_running_loop(), pause=lambda: _bump(events, "paused"),
                     resume=lambda: _bump(events, "resumed"), on_error=events.errors.append, **limits)


def _bump(events: Events, name: str) -> None:
    setattr(events, name, getattr(events, name) + 1)


async def read_all(peer: socket.socket, size: int, *, chunk: int = 65536, timeout: float = 10.0) -> bytes:
    loop = asyncio.get_running_loop()
    out = bytearray()
    while len(out) < size:
        got = await asyncio.wait_for(loop.sock_recv(peer, min(chunk, size - len(out))), timeout)
        if not got:
            break
        out += got
    return bytes(out)


async def read_until_error(peer: socket.socket, events: Events) -> None:
    """Read what comes until the queue reported its failure (the test's socket itself stays open)."""
    loop = asyncio.get_running_loop()
    for _ in range(200):
        if events.errors:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(loop.sock_recv(peer, 65536), 0.02)


def file_bytes(file: Any, position: int, length: int) -> bytes:
    return os.pread(file.fileno(), length, position)


async def test_a_large_region_resumes_after_partial_sends_and_eagain(pair: Any, data_file: Any) -> None:
    ours, peer = pair
    events = Events()
    queue = make_queue(ours, events)
    queue.write([FileRegion(data_file, 1000, 900_000)])
    assert 0 < queue.size < 900_000  # the socket took part of it; the rest waits for writability
    got = await read_all(peer, 900_000)
    assert got == file_bytes(data_file, 1000, 900_000)
    assert queue.size == 0
    assert queue.sendfile_bytes == 900_000 and queue.copied_bytes == 0
    assert events.errors == []
    queue.close()


async def test_bytes_parts_and_regions_keep_their_order(pair: Any, data_file: Any) -> None:
    ours, peer = pair
    events = Events()
    queue = make_queue(ours, events)
    responses = [
        [b"head-1", FileRegion(data_file, 0, 70_000), b"mid", FileRegion(data_file, 500_000, 30_000), b"tail-1"],
        [b"second answer, bytes only"],
        [memoryview(b"head-3"), FileRegion(data_file, 10, 200_000)],
    ]
    expected = b""
    for chunks in responses:
        queue.write(chunks)
        for chunk in chunks:
            expected += bytes(chunk) if isinstance(chunk, bytes | memoryview) else file_bytes(
                data_file, chunk.position, len(chunk))
    assert await read_all(peer, len(expected), chunk=4096) == expected
    assert queue.sendfile_bytes == 300_000
    queue.close()


async def test_the_bytes_around_a_spliced_region_ride_in_its_pipe(pair: Any, data_file: Any, pipes: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer's header before a region and its rest after it leave in the region's pipe, in one push,
    never by writev of their own (each would be one more TCP segment and one more wake-up of the client);
    bytes parts too large to ride (over PIPE_BYTES_MAX) go by writev as before, in order."""
    writevs: list[int] = []
    real_writev = os.writev

    def counting_writev(fd: int, parts: Any) -> int:
        writevs.append(sum(len(p) for p in parts))
        return real_writev(fd, parts)

    monkeypatch.setattr(writer_module.os, "writev", counting_writev)
    ours, peer = pair
    events = Events()
    queue = make_queue(ours, events)
    big = b"B" * (writer_module.PIPE_BYTES_MAX + 1)
    chunks = [b"head", b"er", FileRegion(data_file, 3, 150_000), b"tail", FileRegion(data_file, 200_000, 70_000),
              b"end", big, FileRegion(data_file, 400_000, 100_000), b"!"]
    queue.write(chunks)
    expected = b"header" + file_bytes(data_file, 3, 150_000) + b"tail" + file_bytes(data_file, 200_000, 70_000) \
        + b"end" + big + file_bytes(data_file, 400_000, 100_000) + b"!"
    assert await read_all(peer, len(expected), chunk=4096) == expected
    assert queue.size == 0 and queue.sendfile_bytes == 320_000 and queue.copied_bytes == 0
    if pipes is None:
        assert writevs  # sendfile alone: bytes go by writev
    else:
        assert writevs == [len(big)]  # only the part too large to ride in a pipe
    queue.close()


async def test_bytes_after_a_region_that_fills_its_pipe_go_by_writev(pair: Any, data_file: Any, pipes: Any) -> None:
    """A region whose last fill leaves no room in the pipe: what follows it waits for writev, in order."""
    if pipes is None:
        pytest.skip("pipes only")
    ours, peer = pair
    events = Events()
    queue = make_queue(ours, events)
    size = 2 * pipes.size  # page-aligned start: each fill takes the whole pipe
    queue.write([FileRegion(data_file, 0, size), b"after"])
    assert await read_all(peer, size + 5) == file_bytes(data_file, 0, size) + b"after"
    assert queue.size == 0
    queue.close()


async def test_a_slow_reader_pauses_and_a_drained_queue_resumes(pair: Any, data_file: Any) -> None:
    ours, peer = pair
    events = Events()
    queue = make_queue(ours, events, high_water=64 * 1024, low_water=16 * 1024)
    queue.write([b"x" * 1000, FileRegion(data_file, 0, 500_000)])
    assert events.paused == 1 and events.resumed == 0
    queue.write([b"more while paused"])  # answers may still be queued; the connection stops reading
    assert events.paused == 1
    drained: list[bool] = []
    queue.when_drained(lambda: drained.append(True))
    assert not drained
    await read_all(peer, 1000 + 500_000 + 17)
    assert events.resumed == 1 and drained == [True]
    queue.close()


async def test_bytes_only_backpressure_bounds_memory(pair: Any) -> None:
    ours, peer = pair
    events = Events()
    queue = make_queue(ours, events, high_water=64 * 1024, low_water=16 * 1024)
    for _ in range(10):
        queue.write([b"y" * 20_000])
    assert events.paused == 1
    assert await read_all(peer, 200_000) == b"y" * 200_000
    assert events.resumed == 1 and queue.size == 0
    queue.close()


async def test_close_mid_send_drops_the_rest_and_lets_go_of_the_socket(pair: Any, data_file: Any) -> None:
    ours, _ = pair
    events = Events()
    queue = make_queue(ours, events)
    queue.write([FileRegion(data_file, 0, 1 << 20)])
    assert queue.size > 0
    queue.close()
    assert queue.size == 0 and queue.closed
    queue.write([b"after close"])  # ignored, no error
    queue.close()  # twice is fine
    assert events.errors == []
    await asyncio.sleep(0.01)  # no writer callback left behind to fire on a closed descriptor


async def test_a_peer_gone_mid_send_reports_one_error(pair: Any, data_file: Any) -> None:
    ours, peer = pair
    events = Events()
    queue = make_queue(ours, events)
    queue.write([FileRegion(data_file, 0, 1 << 20)])
    peer.close()
    for _ in range(50):
        if events.errors:
            break
        await asyncio.sleep(0.01)
    assert len(events.errors) == 1 and isinstance(events.errors[0], OSError)
    assert queue.closed


async def test_a_segment_file_closed_mid_send_fails_the_connection(pair: Any, tmp_path: Path) -> None:
    """A region whose file was closed (its log closed, a retired segment past its delay) cannot be
    finished: the client got half an answer, so the connection must close rather than send other bytes."""
    ours, peer = pair
    path = tmp_path / "doomed.log"
    path.write_bytes(b"z" * 400_000)
    file = open(path, "rb", buffering=0)  # noqa: SIM115
    events = Events()
    queue = make_queue(ours, events)
    queue.write([FileRegion(file, 0, 400_000)])
    assert queue.size > 0
    file.close()
    await read_until_error(peer, events)
    assert len(events.errors) == 1 and events.errors[0].errno == errno.EBADF  # type: ignore[attr-defined]


async def test_a_file_truncated_under_a_region_fails_instead_of_hanging(pair: Any, tmp_path: Path) -> None:
    ours, peer = pair
    path = tmp_path / "cut.log"
    path.write_bytes(b"q" * 400_000)
    with open(path, "r+b", buffering=0) as file:
        events = Events()
        queue = make_queue(ours, events)
        queue.write([FileRegion(file, 0, 400_000)])
        os.ftruncate(file.fileno(), 100_000)
        await read_until_error(peer, events)
    assert len(events.errors) == 1


async def test_a_file_sendfile_cannot_splice_is_copied(pair: Any, data_file: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> int:
        raise OSError(errno.EINVAL, "not here")

    monkeypatch.setattr(writer_module.os, "sendfile", refuse)
    monkeypatch.setattr(writer_module.os, "splice", refuse)  # nor can it be spliced
    ours, peer = pair
    events = Events()
    queue = make_queue(ours, events)
    queue.write([b"<", FileRegion(data_file, 7, 100_000), b">"])
    got = await read_all(peer, 100_002)
    assert got == b"<" + file_bytes(data_file, 7, 100_000) + b">"
    assert queue.copied_bytes == 100_000 and queue.sendfile_bytes == 0
    queue.close()


async def test_a_segment_deleted_mid_send_is_still_sent_whole(pair: Any, tmp_path: Path) -> None:
    """Retention or a roll-and-delete unlinks the file, but the region holds it open: the rest still goes."""
    ours, peer = pair
    path = tmp_path / "retired.log"
    content = os.urandom(600_000)
    path.write_bytes(content)
    with open(path, "rb", buffering=0) as file:
        events = Events()
        queue = make_queue(ours, events)
        queue.write([b"[", FileRegion(file, 0, 600_000), b"]"])
        assert queue.size > 0
        path.unlink()
        assert await read_all(peer, 600_002) == b"[" + content + b"]"
        assert events.errors == [] and queue.sendfile_bytes == 600_000
        queue.close()


async def test_a_region_of_dropped_data_is_dropped_from_the_cache_once_wholly_sent(pair: Any, tmp_path: Path) -> None:
    """A consumer far behind the page-cache budget: what it was sent is let go again (`storage.page_cache`)."""
    path = tmp_path / "old.log"
    content = os.urandom(800_000)
    path.write_bytes(content)
    with open(path, "rb", buffering=0) as file:
        os.fsync(file.fileno())
        cache = PageCache(0)
        region = FileRegion(file, 0, 800_000)
        region.drop_after_send(cache, 800_000)
        ours, peer = pair
        events = Events()
        queue = make_queue(ours, events)
        queue.write([region])
        assert queue.size > 0  # not all of it yet: nothing dropped
        assert cache.dropped_bytes == 0
        assert await read_all(peer, 800_000) == content
        assert cache.close(timeout=120)  # its queued drops are done (a busy disk can take more than 5 s)
        assert cache.dropped_bytes == 800_000
        queue.close()


async def test_a_queue_whose_transport_is_closing_never_touches_the_descriptor(pair: Any, data_file: Any) -> None:
    """The queue writes the transport's own descriptor: once the transport closes it, the number may be
    another connection's, so nothing more is written to it, and what waited is dropped without an error."""
    ours, peer = pair
    events = Events()
    open_ = [True]
    queue = make_queue(ours, events, is_open=lambda: open_[0])
    queue.write([FileRegion(data_file, 0, 900_000)])
    assert queue.size > 0  # waiting for writability
    open_[0] = False
    got = b""
    with contextlib.suppress(TimeoutError):
        got = await asyncio.wait_for(read_all(peer, 900_000), 0.5)
    assert len(got) < 900_000  # the wait ended without another write
    assert queue.closed and queue.size == 0 and events.errors == []
    queue.write([b"late answer"])  # dropped: a closed queue writes nothing
    await asyncio.sleep(0.05)
    assert not _readable(peer)


def _readable(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False


async def test_a_queue_costs_no_descriptor_of_its_own(pair: Any) -> None:
    ours, _peer = pair
    make_queue(ours, Events()).close()  # the loop's waiter is made once, on first use
    gc.collect()  # earlier tests' garbage must not close its descriptors while we count
    before = len(os.listdir("/proc/self/fd"))
    queues = [make_queue(ours, Events()) for _ in range(20)]
    assert len(os.listdir("/proc/self/fd")) <= before
    for queue in queues:
        queue.close()
