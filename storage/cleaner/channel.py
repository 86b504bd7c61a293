"""The pipe between the broker and its cleaner worker: length-prefixed pickled tuples, one each way.

Both ends are the same program (the worker is started by the broker from its own interpreter), so
pickle is the right codec; nothing else writes to these pipes. A frame is written with one `write`
call per chunk the pipe takes; a reader that met the end of the pipe, or a frame cut short, learns it
as `ChannelClosed` (the other side died).

Messages, broker -> worker:  ("clean", CleanJob, WorkerSettings), ("swapped", ok), ("stop",), ("exit",)
Messages, worker -> broker:  ("ready", pid), ("swap", old bases, new base, size), ("done", CleanResult),
                             ("aborted", reason), ("failed", kind, *details)
"""

from __future__ import annotations

import os
import pickle
import select
import struct
from typing import Any

LENGTH = struct.Struct(">I")
#: a frame longer than this is a broken stream, not a message
MAX_FRAME = 1 << 30


class ChannelClosed(Exception):
    """The other end of the pipe is gone (the process exited or was killed)."""


class Channel:
    """One end of the broker <-> worker pipe pair."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._poller: select.poll | None = None

    def send(self, *message: Any) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        data = memoryview(LENGTH.pack(len(payload)) + payload)
        try:
            while data:
                data = data[os.write(self.write_fd, data):]
        except (BrokenPipeError, ConnectionResetError, OSError) as exc:
            raise ChannelClosed(f"cannot write to the pipe: {exc}") from exc

    def readable(self, timeout: float) -> bool:
        """A message (or the end of the pipe) is waiting; waits up to `timeout` seconds. (`poll`, not
        `select`: a broker with thousands of segment files open hands out descriptors past FD_SETSIZE.)"""
        if self._poller is None:
            self._poller = select.poll()
            self._poller.register(self.read_fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(self._poller.poll(max(timeout, 0) * 1000))

    def receive(self) -> tuple[Any, ...]:
        """The next message; blocks until it is whole."""
        (size,) = LENGTH.unpack(self._exactly(LENGTH.size))
        if size > MAX_FRAME:
            raise ChannelClosed(f"a frame of {size} bytes: the stream is broken")
        message = pickle.loads(self._exactly(size))
        if not isinstance(message, tuple) or not message:
            raise ChannelClosed(f"not a message: {type(message).__name__}")
        return message

    def _exactly(self, size: int) -> bytes:
        chunks = []
        while size:
            try:
                chunk = os.read(self.read_fd, min(size, 1 << 20))
            except OSError as exc:
                raise ChannelClosed(f"cannot read from the pipe: {exc}") from exc
            if not chunk:
                raise ChannelClosed("the other end closed the pipe")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
