"""The pool of pipes large file regions are spliced through: what clients that stop reading can hold (at
most `max_pipes` pipes; every other connection sends by sendfile), a close with bytes still in a pipe,
and a kernel that refuses a pipe (out of descriptors, over the per-user pipe quota). Real socket pairs
with small buffers, so sends really stop half way."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker import splice_pipes
from pybroker.broker.send_queue import SendQueue
from pybroker.broker.splice_pipes import PipePool
from pybroker.storage.log import FileRegion

SIZE = 3 << 20  # three fills of a 1 MiB pipe


@pytest.fixture
def data_file(tmp_path: Path) -> Iterator[Any]:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(SIZE))
    with open(path, "rb", buffering=0) as file:
        yield file


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    for _ in range(3):
        ours, peer = socket.socketpair()
        for sock in (ours, peer):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
            sock.setblocking(False)
        made.append((ours, peer))
    yield made
    for ours, peer in made:
        ours.close()
        peer.close()


def queue_on(sock: socket.socket, pool: PipePool | None, errors: list[BaseException]) -> SendQueue:
    return SendQueue(sock.fileno(), asyncio.get_running_loop(), pause=lambda: None, resume=lambda: None,
                     on_error=errors.append, pipes=pool)


async def read_all(peer: socket.socket, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    out = bytearray()
    while len(out) < size:
        got = await asyncio.wait_for(loop.sock_recv(peer, min(1 << 20, size - len(out))), 10)
        if not got:
            break
        out += got
    return bytes(out)


def content(file: Any) -> bytes:
    return os.pread(file.fileno(), SIZE, 0)


async def test_clients_that_stop_reading_hold_at_most_the_pool_and_the_rest_use_sendfile(
        pairs: Any, data_file: Any) -> None:
    pool = PipePool(max_pipes=2)
    errors: list[BaseException] = []
    queues = [queue_on(ours, pool, errors) for ours, _ in pairs]
    for queue in queues:
        queue.write([FileRegion(data_file, 0, SIZE)])
    assert all(0 < queue.size < SIZE for queue in queues)  # each sent some, and each is stuck
    assert pool.open_pipes == 2  # the first two hold a pipe each, with bytes in it...
    assert pool.take() is None  # ...and there is none for anyone else: the third went by sendfile
    for queue, (_, peer) in zip(queues, pairs, strict=True):
        assert await read_all(peer, SIZE) == content(data_file)
        assert queue.size == 0 and queue.sendfile_bytes == SIZE and queue.copied_bytes == 0
    assert errors == []
    pipe = pool.take()  # given back empty once their regions were sent
    assert pipe is not None and pipe.held == 0
    pool.give(pipe)
    for queue in queues:
        queue.close()
    pool.close()
    assert pool.open_pipes == 0


async def test_a_close_with_bytes_in_the_pipe_closes_that_pipe(pairs: Any, data_file: Any) -> None:
    pool = PipePool(max_pipes=1)
    pipe = pool.take()
    assert pipe is not None
    pool.give(pipe)  # the next region borrows this very pipe
    errors: list[BaseException] = []
    queue = queue_on(pairs[0][0], pool, errors)
    queue.write([FileRegion(data_file, 0, SIZE)])
    assert queue.size > 0 and pipe.held > 0
    queue.close()  # the client went: what the pipe holds is no use to anyone
    assert pool.open_pipes == 0
    for fd in (pipe.read_fd, pipe.write_fd):
        with pytest.raises(OSError) as info:
            os.fstat(fd)
        assert info.value.errno == errno.EBADF
    assert errors == []


async def test_a_region_no_longer_than_the_kernels_own_pipe_goes_by_sendfile(pairs: Any, data_file: Any) -> None:
    pool = PipePool(max_pipes=1)
    errors: list[BaseException] = []
    queue = queue_on(pairs[0][0], pool, errors)
    queue.write([FileRegion(data_file, 5, splice_pipes.SPLICE_ABOVE)])
    assert await read_all(pairs[0][1], splice_pipes.SPLICE_ABOVE) == content(data_file)[5:5 + splice_pipes.SPLICE_ABOVE]
    assert pool.open_pipes == 0  # never asked for one
    queue.close()


def test_a_pipe_the_kernel_will_not_enlarge_means_sendfile_until_the_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    calls: list[int] = []

    def refuse(fd: int, command: int, arg: int = 0) -> int:
        if command == fcntl.F_SETPIPE_SZ:
            calls.append(fd)
            raise PermissionError(errno.EPERM, "over the user's pipe quota")
        return 0

    monkeypatch.setattr(fcntl, "fcntl", refuse)
    now = [1000.0]
    monkeypatch.setattr(splice_pipes.time, "monotonic", lambda: now[0])
    pool = PipePool()
    assert pool.take() is None and pool.open_pipes == 0
    assert pool.take() is None and len(calls) == 1  # not asked again at once: sendfile meanwhile
    now[0] += splice_pipes.RETRY_S
    assert pool.take() is None and len(calls) == 2


def test_no_descriptor_for_a_pipe_means_sendfile(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_fds(flags: int) -> tuple[int, int]:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(splice_pipes.os, "pipe2", out_of_fds)
    pool = PipePool()
    assert pool.take() is None and pool.open_pipes == 0


def test_a_pipe_given_back_with_bytes_in_it_is_closed_not_lent() -> None:
    pool = PipePool(max_pipes=1)
    pipe = pool.take()
    assert pipe is not None
    os.write(pipe.write_fd, b"left over")
    pipe.held = 9
    pool.give(pipe)
    assert pool.open_pipes == 0
    fresh = pool.take()
    assert fresh is not None and fresh.held == 0 and os.fstat(fresh.read_fd)
    pool.give(fresh)
    pool.close()
