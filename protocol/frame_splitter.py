"""Splitting a byte stream into size-prefixed Kafka frames, sans-I/O.

Every Kafka request and response is an int32 size followed by that many bytes. The size is checked
against the limit the moment its four bytes arrive, before any buffer grows to hold the frame, so a
hostile or broken peer cannot make us allocate (`socket.request.max.bytes`). Then the caller's `admit`
decides whether that many bytes may be held in memory now (the broker's request memory pool): if not,
the decoder stops right there, keeps the bytes it was given, and continues when `feed` is called again
(with more bytes or none) and `admit` agrees. An admitted frame that has not fully arrived is allocated
once at its final size and filled in place, so a 100 MB frame costs one allocation and one copy of each
byte, never a buffer grown (and copied) again and again.

Frames come out as `bytearray`s: the produce path patches offsets into the records in place, so they
must be writable.

Two ways in: `feed` takes bytes someone else received (`data_received`); `get_buffer` and
`buffer_updated` are the receive-into pair (asyncio's BufferedProtocol). While an admitted frame is
arriving, `get_buffer` hands out the unfilled rest of that frame, so the socket's bytes land where the
handler will read them, copied by nobody; everything else (size prefixes, small frames, a frame's
first bytes) is received into a scratch buffer the caller lends and then fed as usual. The scratch
may be shared by every decoder of one thread: `buffer_updated` copies out all it needs before it returns.

After a large frame (`LARGE_FRAME` or more: produce requests under load), `get_buffer` lends only the
next size prefix's four bytes of the scratch: the next frame is likely large too, and a read into the
whole scratch would take its first 256 KiB there, to be copied into the frame again (for a 256 KiB
produce request, nearly every byte). One more read per large frame, and the kernel's copy is the only
one. After a small frame, reads take the whole scratch again, so a run of small frames costs one read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from struct import Struct


def _frame_allocator() -> Callable[[int], bytearray]:
    """A frame's buffer is filled whole before anyone reads it, so it need not be zeroed first (C, when
    built; `bytearray(size)` zeroes every byte, then the socket writes it again)."""
    try:
        return importlib.import_module("pybroker.protocol.records._walk_accept").uninitialized_bytearray
    except ImportError:
        return bytearray


_new_frame = _frame_allocator()

_SIZE = Struct(">i")
#: a frame at least this large makes the next read take only a size prefix (see the module's docstring);
#: below it the copy saved and the read added cost about the same (measured with 80 and 200 KiB frames)
LARGE_FRAME = 128 * 1024


class FrameError(Exception):
    """The stream is unusable (negative or oversized size prefix); the connection must be closed."""


def _admit_all(size: int) -> bool:
    return True


class FrameDecoder:
    __slots__ = ("_admit", "_direct", "_filled", "_frame", "_large_frame", "_max_frame", "_prefix_next", "_rest",
                 "blocked")

    def __init__(self, max_frame: int, admit: Callable[[int], bool] = _admit_all,
                 large_frame: int = LARGE_FRAME) -> None:
        self._max_frame = max_frame
        self._large_frame = large_frame
        #: asked with a frame's size once its prefix is read; False holds the frame back until asked again
        self._admit = admit
        self._rest = bytearray()  # bytes received but not yet parsed (a partial prefix, or held back)
        self._frame: bytearray | None = None  # an admitted frame still arriving, allocated at its full size
        self._filled = 0
        self._direct = False  # the last `get_buffer` handed out the arriving frame itself
        self._prefix_next = False  # the last frame was large: the next read takes only a size prefix
        #: True while the next frame waits for `admit` to agree; feed again (even with b"") to retry
        self.blocked = False

    @property
    def buffered(self) -> int:
        """Bytes held: received and not yet returned as frames (a frame still arriving counts in full)."""
        return len(self._rest) + (len(self._frame) if self._frame is not None else 0)

    @property
    def partial_size(self) -> int:
        """The size of an admitted frame that is only partly received (0 when none is)."""
        return len(self._frame) if self._frame is not None else 0

    def set_max_frame(self, max_frame: int) -> None:
        """Change the size limit for frames whose prefix is not read yet (SASL: smaller until authenticated)."""
        self._max_frame = max_frame

    def clear(self) -> None:
        """Drop every byte held (the connection is gone): a frame half received must not outlive it."""
        self._rest = bytearray()
        self._frame = None
        self._filled = 0
        self._direct = False
        self._prefix_next = False
        self.blocked = False

    def get_buffer(self, scratch: memoryview) -> memoryview:
        """Where the next received bytes go: the rest of the frame now arriving, else `scratch` (only its
        first four bytes after a large frame, when nothing is held back)."""
        frame = self._frame
        self._direct = frame is not None and not self._rest
        if frame is not None and self._direct:
            return memoryview(frame)[self._filled :]
        if self._prefix_next and not self._rest:
            return scratch[: _SIZE.size]
        return scratch

    def buffer_updated(self, scratch: memoryview, nbytes: int) -> list[bytearray]:
        """`nbytes` were received into what `get_buffer` returned: every frame now complete."""
        frame = self._frame
        if not self._direct or frame is None:
            with scratch[:nbytes] as received:
                return self.feed(received)
        self._direct = False
        self._filled += nbytes
        if self._filled < len(frame):
            return []
        self._frame = None
        self._prefix_next = len(frame) >= self._large_frame
        return [frame]

    def _check(self, size: int) -> None:
        if size < 0:
            raise FrameError(f"negative frame size {size}")
        if size > self._max_frame:
            raise FrameError(f"frame size {size} exceeds the limit of {self._max_frame} bytes")

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Take newly received bytes; return every frame now complete (without its size prefix)."""
        frames: list[bytearray] = []
        if self._rest:
            self._rest += data
            data, self._rest = self._rest, bytearray()
        view = memoryview(data)
        try:
            pos = self._fill(view, frames)
            end = len(view)
            self.blocked = False
            while self._frame is None and end - pos >= 4:
                (size,) = _SIZE.unpack_from(view, pos)
                self._check(size)
                if not self._admit(size):
                    self.blocked = True
                    break
                pos += 4
                if end - pos >= size:
                    frames.append(bytearray(view[pos : pos + size]))
                    pos += size
                    self._prefix_next = size >= self._large_frame
                else:
                    self._frame = _new_frame(size)
                    self._filled = 0
                    pos = self._fill(view[pos:], frames) + pos
            if pos < end:
                self._rest = bytearray(view[pos:])
        finally:
            view.release()
        return frames

    def _fill(self, view: memoryview, frames: list[bytearray]) -> int:
        """Copy the start of `view` into the frame still arriving; how many bytes of `view` were used."""
        frame = self._frame
        if frame is None:
            return 0
        take = min(len(frame) - self._filled, len(view))
        frame[self._filled : self._filled + take] = view[:take]
        self._filled += take
        if self._filled == len(frame):
            frames.append(frame)
            self._frame = None
            self._prefix_next = len(frame) >= self._large_frame
        return take
