"""Pipes of our own that carry large file regions to a socket with `os.splice`, never through the broker.

Why not `os.sendfile` alone: sendfile moves a file to a socket through the kernel's own pipe of 16 pages,
so a 1 MiB fetch reaches the socket as sixteen 64 KiB sends, each pushed out and each waking the client.
Spliced through a 1 MiB pipe of our own, the socket gets as much as it takes in one send. Both are
zero-copy: a pipe holds references to page-cache pages, not copies. Measured on the 2-core VM with the
bench's two librdkafka consumers, in alternating runs (medians): 10 KiB records over one partition (1 MiB
fetches) went from 140k to 144k msgs/s and from 0.34 to 0.28 system CPU s/GB, and with all of the topic
in the page cache from 163k to 185k (a 256 KiB pipe: 176k); 1 KiB over 1,024 partitions from 795k to
830k. 1 KiB over one partition stayed where it was (the clients are the limit there).

Why a small pool, not a pipe per connection: a pipe pins the pages it was given until the socket takes
them, and the kernel caps the pipe capacity one user may hold (`fs.pipe-user-pages-soft`, 64 MiB by
default), past which it refuses to enlarge a pipe. A connection takes a pipe for one region and gives it
back empty once the socket took it all, which on a client that reads is within the same call, so a few
pipes serve every connection. A client that stops reading keeps its pipe, with up to `PIPE_BYTES` in it,
until it reads again or goes; once `MAX_PIPES` are held, other connections use sendfile. So whatever
clients do, the pipes cost at most `2 x MAX_PIPES` descriptors and `MAX_PIPES x PIPE_BYTES` of pinned pages.
Where a pipe cannot be had (no `os.splice`, out of descriptors, the kernel refuses the size) sendfile
carries everything, as before, and the pool tries again only after `RETRY_S`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import structlog

log = structlog.get_logger("pybroker.broker.splice_pipes")

#: the capacity each pipe is given (`F_SETPIPE_SZ`): a consumer's usual fetch of one partition
PIPE_BYTES = 1 << 20
#: pipes open at most: what clients that stop reading can pin is this many times `PIPE_BYTES`
MAX_PIPES = 16
#: regions at most this long go by sendfile: the kernel's own pipe carries them in one send anyway
SPLICE_ABOVE = 64 * 1024
#: after the kernel refused a pipe (descriptors, the per-user pipe quota), sendfile alone for this long
RETRY_S = 10.0

_CAN_SPLICE = hasattr(os, "splice") and hasattr(os, "pipe2")


class Pipe:
    """One pipe: `held` bytes of a region are in it, on their way to a socket."""

    __slots__ = ("held", "read_fd", "size", "write_fd")

    def __init__(self, read_fd: int, write_fd: int, size: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.size = size
        self.held = 0

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class PipePool:
    """At most `max_pipes` pipes of `size` bytes, lent to one region send at a time (any thread)."""

    def __init__(self, max_pipes: int = MAX_PIPES, size: int = PIPE_BYTES) -> None:
        self.max_pipes = max_pipes if _CAN_SPLICE else 0
        self.size = size
        self._free: list[Pipe] = []
        self._open = 0
        self._lock = threading.Lock()
        self._refused_until = 0.0

    @property
    def open_pipes(self) -> int:
        """Pipes open now, lent or free."""
        return self._open

    def take(self) -> Pipe | None:
        """An empty pipe, or None: the caller sends by sendfile instead."""
        with self._lock:
            if self._free:
                return self._free.pop()
            if self._open >= self.max_pipes or time.monotonic() < self._refused_until:
                return None
            self._open += 1
        pipe = self._new()
        if pipe is None:
            with self._lock:
                self._open -= 1
                self._refused_until = time.monotonic() + RETRY_S
        return pipe

    def give(self, pipe: Pipe) -> None:
        """`pipe` is empty again: lend it to the next region."""
        if pipe.held:  # bytes left in it belong to a stream that will never get them
            self.discard(pipe)
            return
        with self._lock:
            self._free.append(pipe)

    def discard(self, pipe: Pipe) -> None:
        """Close `pipe` (its connection went with bytes still in it)."""
        pipe.close()
        with self._lock:
            self._open -= 1

    def close(self) -> None:
        """Close the free pipes (those lent out are discarded by their connections)."""
        with self._lock:
            free, self._free = self._free, []
            self._open -= len(free)
        for pipe in free:
            pipe.close()

    def _new(self) -> Pipe | None:
        try:
            read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            log.warning("no pipe for splicing, sending by sendfile", error=exc.strerror)
            return None
        try:
            import fcntl  # Unix only, as splice

            size = fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, self.size)
        except (OSError, AttributeError) as exc:
            os.close(read_fd)
            os.close(write_fd)
            log.warning("the kernel refused a pipe of this size, sending by sendfile", size=self.size,
                        error=getattr(exc, "strerror", None) or repr(exc))
            return None
        return Pipe(read_fd, write_fd, size)


#: the broker's pool (its connections all live on one event loop; the pool is safe from any thread)
PIPES = PipePool()
