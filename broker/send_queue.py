"""Writing encoded responses, with segment file ranges spliced in by `os.sendfile` or `os.splice`.

uvloop has no `loop.sendfile`, and `os.sendfile` may only run while nothing the transport buffers is
still ahead of it. So on plain TCP a connection's answers never go through the transport's write
buffer: `SendQueue` keeps them, in order, and puts them on the socket itself: bytes parts with
`os.writev`, file regions with `os.sendfile`, or, above `SPLICE_ABOVE`, with `os.splice` through a pipe
borrowed from the pool (`broker.splice_pipes`: the socket gets a large region in one send, not in the
kernel's 64 KiB steps). The few bytes around a spliced region (the answer's header before it, the rest
of the answer or the next partition's header after it) are written into the same pipe ahead of and
behind the region's bytes, so all of it leaves in one push. Sent alone, each was one more TCP segment:
on loopback a send also runs the receiver's side of TCP and wakes the client, so the 75-byte header of a
1 MB fetch answer cost a twelfth of the loop's time for that answer, and librdkafka, which reads whole
answers, woke once more for the 3 bytes after the records (`bench/fetch_cost.py` measures the round trip).
When the socket takes no more (a partial send, EAGAIN) it
waits for the socket to be writable and resumes where it stopped. The loop refuses `add_writer` on a
descriptor its transport owns, and a duplicate would make each connection cost two descriptors, so the
wait goes through the loop's one epoll instance (`broker.writable_waiter`). The queue uses the
transport's own descriptor, and only while `is_open()` says the transport has not begun to close it:
once it has, the number may belong to another connection, and the queue drops what it holds unsent. Segment bytes are never read into Python on
this path. TLS cannot splice files into an encrypted stream: `CopyingWriter` reads regions with `pread`
and writes them through the transport.

Backpressure: past `high_water` bytes queued (bytes parts and file regions alike) the queue calls its
`pause` callback (the connection stops reading) and `resume` once it drained below `low_water`, as the
transport's own write buffer would. The only memory the queue holds is encoded response bytes; regions
are (file, position, length) and keep their file object alive until sent.

A failure while sending (the peer reset the connection, a segment file closed or cut under a pending
region) drops what is queued and calls `on_error` once: a response the client got half of cannot be
finished, so the connection must close.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from pybroker.broker.metrics.fetch_bytes import COPIED, SENDFILE
from pybroker.broker.splice_pipes import PIPES, SPLICE_ABOVE, Pipe, PipePool
from pybroker.broker.writable_waiter import WritableWaiter, waiter_for

#: queued bytes above which the connection stops reading, and below which it reads again
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024
#: buffers per `os.writev` call (Linux's IOV_MAX is 1024)
MAX_IOV = 512
#: errors of `os.sendfile` that mean "this file cannot be spliced here", not "the socket is broken"
_NO_SENDFILE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})
#: more of the region follows the bytes being spliced: the socket need not push them out alone
_MORE = getattr(os, "SPLICE_F_MORE", 0)
#: bytes parts before or after a spliced region that ride in its pipe, at most: a pipe write this small
#: is atomic (PIPE_BUF), so it goes in whole or not at all (a full pipe: they are sent by writev instead)
PIPE_BYTES_MAX = 4096


def sendfile_possible(transport: asyncio.BaseTransport) -> bool:
    """Plain TCP (not TLS, not a pipe): the socket may be written to directly."""
    sock = transport.get_extra_info("socket")
    return (sock is not None and getattr(sock, "type", None) == socket.SOCK_STREAM
            and transport.get_extra_info("sslcontext") is None
            and transport.get_extra_info("ssl_object") is None)


class _Region:
    """What is left to send of a file region: its file object stays referenced until then. `sent` is the
    region's own `sent()` (the page-cache budget's drop-behind), called once all of it went."""

    __slots__ = ("file", "left", "no_splice", "position", "sent")

    def __init__(self, file: Any, position: int, left: int, sent: Callable[[], None] | None) -> None:
        self.file = file
        self.position = position
        self.left = left
        self.sent = sent
        self.no_splice = False  # its file refused to be spliced into a pipe: sendfile (or a copy) only


class SendQueue:
    """A connection's answers in order, written to its plain-TCP socket with writev, sendfile and splice.
    Event-loop thread only."""

    __slots__ = ("_fd", "_high", "_is_open", "_low", "_on_drained", "_on_error", "_on_writable_cb", "_pause",
                 "_paused", "_pipe", "_pipe_front", "_pipe_tail", "_pipes", "_queue", "_queued", "_resume",
                 "_waiter", "_waiting", "closed", "copied_bytes", "sendfile_bytes")

    def __init__(self, sock_fd: int, loop: asyncio.AbstractEventLoop, *, pause: Callable[[], None],
                 resume: Callable[[], None], on_error: Callable[[BaseException], None],
                 high_water: int = HIGH_WATER, low_water: int = LOW_WATER,
                 pipes: PipePool | None = PIPES, is_open: Callable[[], bool] = lambda: True) -> None:
        # the transport's descriptor: used only while `is_open()` (the transport has not begun closing it)
        self._fd = sock_fd
        self._is_open = is_open
        self._waiter: WritableWaiter = waiter_for(loop)
        self._on_writable_cb = self._on_writable  # one bound method: the waiter cancels by identity
        self._pause = pause
        self._resume = resume
        self._on_error = on_error
        self._high = high_water
        self._low = low_water
        self._queue: deque[Any] = deque()  # bytes-like parts (memoryviews once partly sent) and _Regions
        self._queued = 0  # bytes in the queue, regions counted by what is left of them
        self._paused = False
        self._waiting = False  # a writer callback is registered
        self._on_drained: list[Callable[[], None]] = []
        self.closed = False
        self.sendfile_bytes = 0  # zero-copy: by sendfile or splice
        self.copied_bytes = 0
        self._pipes = pipes  # where large regions borrow a pipe to be spliced through (None: sendfile only)
        self._pipe: Pipe | None = None  # the pipe borrowed for the region at the head, while it holds bytes
        # of what the pipe holds, the bytes parts written ahead of the region's bytes and behind its end
        self._pipe_front = 0
        self._pipe_tail = 0

    @property
    def size(self) -> int:
        """Bytes still to be sent."""
        return self._queued

    def write(self, chunks: Sequence[Any]) -> None:
        """Queue one response's parts (bytes-like, or file regions with `file`, `position` and a length)."""
        if self.closed:
            return
        queue = self._queue
        for chunk in chunks:
            if isinstance(chunk, bytes | bytearray | memoryview):
                size = len(chunk)
                if size:
                    queue.append(chunk)
                    self._queued += size
            else:
                size = len(chunk)
                if size:
                    queue.append(_Region(chunk.file, chunk.position, size, getattr(chunk, "sent", None)))
                    self._queued += size
        if not self._waiting:
            self._send()
        if not self.closed and not self._paused and self._queued > self._high:
            self._paused = True
            self._pause()

    def when_drained(self, callback: Callable[[], None]) -> None:
        """Call `callback` once everything queued has been sent (now, if nothing is)."""
        if not self._queue or self.closed:
            callback()
        else:
            self._on_drained.append(callback)

    def close(self) -> None:
        """Drop what is queued and stop waiting on the socket (the connection is gone; its transport
        closes the descriptor)."""
        if self.closed:
            return
        self.closed = True
        self._queue.clear()
        self._queued = 0
        self._on_drained.clear()
        if self._pipe is not None and self._pipes is not None:
            self._pipes.discard(self._pipe)  # what it still holds was never sent: it is no use to anyone
            self._pipe = None
            self._pipe_front = self._pipe_tail = 0
        if self._waiting:
            self._waiting = False
            self._waiter.cancel(self._fd, self._on_writable_cb)

    # -- sending --------------------------------------------------------------------------------
    def _on_writable(self) -> None:
        self._waiting = False  # the waiter's watch was one shot
        self._send()

    def _send(self) -> None:
        """Put as much on the socket as it takes now; wait for writability if something is left."""
        queue = self._queue
        if not self._is_open():  # the transport closes (or closed) the descriptor: it is not ours to write
            self.close()
            return
        try:
            while queue:
                head = queue[0]
                if isinstance(head, _Region):
                    sent_all = self._send_region(head)
                    if queue and queue[0] is not head:
                        continue  # bytes that waited in a pipe ahead of it are back in the queue: first
                    if not sent_all:
                        break
                    queue.popleft()
                elif self._pipe is None and self._lead_into_pipe():
                    continue  # they wait in a pipe, ahead of the region that follows them
                elif not self._send_bytes():
                    break
        except OSError as exc:
            self._fail(exc)
            return
        if self.closed:
            return
        if queue:
            if not self._waiting:
                self._waiting = True
                self._waiter.wait(self._fd, self._on_writable_cb)
        elif self._waiting:
            self._waiting = False
            self._waiter.cancel(self._fd, self._on_writable_cb)
        if self._paused and self._queued <= self._low:
            self._paused = False
            self._resume()
        if self._on_drained and not queue:
            callbacks, self._on_drained = self._on_drained, []
            for callback in callbacks:
                callback()

    def _send_region(self, region: _Region) -> bool:
        """Send what is left of a region; True when all of it went."""
        try:
            file_fd = region.file.fileno()
        except ValueError:  # the segment file was closed under us (its log closed, its delay passed)
            raise OSError(errno.EBADF, "segment file closed before its region was sent") from None
        if self._pipe is not None or (region.left > SPLICE_ABOVE and self._pipes is not None
                                      and not region.no_splice):
            spliced = self._splice_region(region, file_fd)
            if spliced is not None:
                return spliced
            if self._queue[0] is not region:
                return False  # the bytes ahead of it are back in the queue
        while region.left:
            try:
                sent = os.sendfile(self._fd, file_fd, region.position, region.left)
            except BlockingIOError:
                return False
            except InterruptedError:
                continue
            except OSError as exc:
                if exc.errno not in _NO_SENDFILE:
                    raise
                self._copy_region(region, file_fd)  # a file sendfile cannot splice: bytes like any other
                break
            if sent == 0:  # the file ends before the region does (truncated under us)
                raise OSError(errno.EIO, "segment file shorter than the region being sent")
            region.position += sent
            region.left -= sent
            self._sent_zero_copy(sent)
        if region.sent is not None:
            region.sent()
        return True

    def _sent_zero_copy(self, sent: int) -> None:
        """`sent` bytes of a region left for the socket without passing through Python (sendfile or splice)."""
        self._queued -= sent
        self.sendfile_bytes += sent
        SENDFILE.inc(sent)

    def _splice_region(self, region: _Region, file_fd: int) -> bool | None:
        """Send what is left of a region through a borrowed pipe: file to pipe, pipe to socket, up to the
        pipe's size at a time. True when all of it went, False when the socket is full (the pipe stays
        borrowed, holding what the socket did not take yet), None when no pipe can be had or the file
        cannot be spliced (the caller sends by sendfile, which copies what it cannot splice either)."""
        pipes = self._pipes
        assert pipes is not None
        pipe = self._pipe
        if pipe is None:
            pipe = pipes.take()
            if pipe is None:
                return None
            self._pipe = pipe
        while region.left or pipe.held:
            if region.left and pipe.held == self._pipe_front:  # none of the region's bytes in the pipe
                try:
                    filled = os.splice(file_fd, pipe.write_fd, min(region.left, pipe.size - pipe.held),
                                       offset_src=region.position)
                except OSError as exc:
                    if exc.errno not in _NO_SENDFILE and not isinstance(exc, BlockingIOError):
                        raise
                    if pipe.held:  # only the bytes ahead of the region are in it
                        self._unlead(pipe, region)
                        return None
                    self._pipe = None
                    pipes.give(pipe)  # empty: nothing of this region went into it
                    return None
                if filled == 0:  # the file ends before the region does (truncated under us)
                    raise OSError(errno.EIO, "segment file shorter than the region being sent")
                region.position += filled
                region.left -= filled
                pipe.held += filled
                if not region.left:
                    self._fill_tail(pipe)
            try:
                sent = os.splice(pipe.read_fd, self._fd, pipe.held, flags=_MORE if region.left else 0)
            except BlockingIOError:
                return False
            self._took_from_pipe(pipe, sent)
        self._pipe = None
        pipes.give(pipe)
        if region.sent is not None:
            region.sent()
        return True

    def _lead_into_pipe(self) -> bool:
        """When a run of small bytes parts at the head is followed by a region large enough to be spliced,
        write them into a borrowed pipe (the region's bytes follow them there) and take them off the queue;
        False when they must go by writev (no such region, no pipe to be had)."""
        pipes = self._pipes
        if pipes is None:
            return False
        parts, size, after = self._small_run(0)
        if not (isinstance(after, _Region) and after.left > SPLICE_ABOVE and not after.no_splice):
            return False  # bytes alone, too many of them, or a region sent by sendfile: writev
        pipe = pipes.take()
        if pipe is None:
            return False
        self._pipe = pipe  # from here on a failure's `close` discards it
        if not self._into_pipe(pipe, parts, size):
            self._pipe = None
            pipes.give(pipe)  # still empty
            return False
        for _ in parts:
            self._queue.popleft()
        self._pipe_front = size
        return True

    def _unlead(self, pipe: Pipe, region: _Region) -> None:
        """The region cannot be spliced: the bytes waiting ahead of it in `pipe` (all it holds) go back to
        the head of the queue, to be sent by writev, and the region by sendfile after them."""
        data = os.read(pipe.read_fd, pipe.held)  # at most PIPE_BYTES_MAX: one read takes them all
        if len(data) != pipe.held:
            raise OSError(errno.EIO, "a short read from a splice pipe")
        pipe.held = 0
        self._pipe_front = 0
        self._pipe = None
        assert self._pipes is not None
        self._pipes.give(pipe)
        region.no_splice = True
        self._queue.appendleft(data)

    def _took_from_pipe(self, pipe: Pipe, sent: int) -> None:
        """The socket took `sent` bytes of the pipe: bytes parts ahead of the region's bytes leave first,
        those behind them last; only the region's own count as sent without a copy."""
        front = min(sent, self._pipe_front)
        region_bytes = min(sent - front, pipe.held - self._pipe_front - self._pipe_tail)
        tail = sent - front - region_bytes
        pipe.held -= sent
        self._pipe_front -= front
        self._pipe_tail -= tail
        self._queued -= front + tail
        if region_bytes:
            self._sent_zero_copy(region_bytes)

    def _fill_tail(self, pipe: Pipe) -> None:
        """Write the run of small bytes parts right behind the region at the head into `pipe`, behind the
        region's last bytes, and take them off the queue (they stay counted in `_queued` until sent)."""
        parts, size, _ = self._small_run(1)
        if size and self._into_pipe(pipe, parts, size):
            for _ in parts:
                del self._queue[1]
            self._pipe_tail = size

    def _small_run(self, start: int) -> tuple[list[Any], int, Any]:
        """The bytes parts from `queue[start]` on that fit in PIPE_BYTES_MAX together, their size, and what
        follows them: a region, the part that did not fit, or None at the queue's end."""
        queue = self._queue
        parts: list[Any] = []
        size = 0
        for index in range(start, len(queue)):
            item = queue[index]
            if isinstance(item, _Region) or size + len(item) > PIPE_BYTES_MAX:
                return parts, size, item
            parts.append(item)
            size += len(item)
        return parts, size, None

    @staticmethod
    def _into_pipe(pipe: Pipe, parts: list[Any], size: int) -> bool:
        """Write `parts` (`size` bytes, at most PIPE_BUF: all or nothing) into `pipe`; False when it is full."""
        try:
            written = os.write(pipe.write_fd, b"".join(parts))
        except BlockingIOError:
            return False
        if written != size:  # cannot happen for a write of at most PIPE_BUF; never split a part silently
            raise OSError(errno.EIO, "a short write into a splice pipe")
        pipe.held += size
        return True

    def _copy_region(self, region: _Region, file_fd: int) -> None:
        data = os.pread(file_fd, region.left, region.position)
        if len(data) < region.left:
            raise OSError(errno.EIO, "segment file shorter than the region being sent")
        self.copied_bytes += len(data)
        COPIED.inc(len(data))
        self._queue.insert(1, data)  # the caller pops the region at the head: the bytes take its place

    def _send_bytes(self) -> bool:
        """writev the run of bytes parts at the head; True when all of them went."""
        queue = self._queue
        parts: list[Any] = []
        for item in queue:
            if isinstance(item, _Region) or len(parts) >= MAX_IOV:
                break
            parts.append(item)
        while True:
            try:
                sent = os.writev(self._fd, parts)
                break
            except BlockingIOError:
                return False
            except InterruptedError:
                continue
        self._queued -= sent
        for part in parts:
            size = len(part)
            if sent >= size:
                queue.popleft()
                sent -= size
                continue
            queue[0] = memoryview(part)[sent:]
            return False
        return True

    def _fail(self, exc: BaseException) -> None:
        self.close()
        self._on_error(exc)


class CopyingWriter:
    """TLS (and anything without a socket of its own): regions are read with `pread` and written
    through the transport, which does the buffering and the backpressure itself."""

    __slots__ = ("_transport", "copied_bytes", "sendfile_bytes")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.sendfile_bytes = 0
        self.copied_bytes = 0

    @property
    def size(self) -> int:
        return self._transport.get_write_buffer_size()

    def write(self, chunks: Sequence[Any]) -> None:
        parts: list[Any] = []
        for chunk in chunks:
            if isinstance(chunk, bytes | bytearray | memoryview):
                parts.append(chunk)
                continue
            data = os.pread(chunk.file.fileno(), len(chunk), chunk.position)
            sent = getattr(chunk, "sent", None)
            if sent is not None:  # read: its pages may go (the transport holds the bytes now)
                sent()
            self.copied_bytes += len(data)
            COPIED.inc(len(data))
            parts.append(data)
        if parts:
            self._transport.writelines(parts)

    def when_drained(self, callback: Callable[[], None]) -> None:
        callback()  # the transport's close() itself waits for its buffer

    def close(self) -> None:
        pass
