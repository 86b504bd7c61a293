"""Splitting a byte stream into size-prefixed Kafka frames, sans-I/O.

Every Kafka request and response is an int32 size followed by that many bytes. The size is checked
against the limit the moment its four bytes arrive, before any buffer grows to hold the frame, so a
hostile or broken peer cannot make us allocate (`socket.request.max.bytes`). Frames come out as
`bytearray`s: the produce path patches offsets into the records in place, so they must be writable.
"""

from __future__ import annotations

from struct import Struct

_SIZE = Struct(">i")


class FrameError(Exception):
    """The stream is unusable (negative or oversized size prefix); the connection must be closed."""


class FrameDecoder:
    __slots__ = ("_buffer", "_max_frame")

    def __init__(self, max_frame: int) -> None:
        self._max_frame = max_frame
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def _check(self, size: int) -> None:
        if size < 0:
            raise FrameError(f"negative frame size {size}")
        if size > self._max_frame:
            raise FrameError(f"frame size {size} exceeds the limit of {self._max_frame} bytes")

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Take newly received bytes; return every frame now complete (without its size prefix)."""
        frames: list[bytearray] = []
        buffering = bool(self._buffer)
        if buffering:
            self._buffer += data
            view = memoryview(self._buffer)
        else:
            view = memoryview(data)
        pos, end = 0, len(view)
        try:
            while end - pos >= 4:
                (size,) = _SIZE.unpack_from(view, pos)
                self._check(size)
                if end - pos - 4 < size:
                    break
                frames.append(bytearray(view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
            rest = None if buffering else bytearray(view[pos:])
        finally:
            view.release()
        if rest is not None:
            self._buffer = rest
        elif pos:
            del self._buffer[:pos]
        return frames
