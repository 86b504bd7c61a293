"""Kafka's sparse segment indexes: `.index` (offset -> position) and `.timeindex` (time -> offset).

`.index` entries are 8 bytes (relative offset int32, position int32); `.timeindex` entries are 12 bytes
(timestamp int64, relative offset int32), added only when the largest timestamp grows. Entries live in
memory as arrays for bisecting and are written to their files at flush and close, since a crash makes
recovery rebuild them from the log anyway.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from pathlib import Path
from struct import Struct

OFFSET_ENTRY = Struct(">ii")
TIME_ENTRY = Struct(">qi")


def _append_durably(path: Path, data: bytearray) -> None:
    """Append index entries not yet on disk, and fsync them."""
    if not data:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


class OffsetIndex:
    __slots__ = ("_pending", "base_offset", "path", "positions", "relative")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.relative = array("i")
        self.positions = array("i")
        self._pending = bytearray()

    def __len__(self) -> int:
        return len(self.relative)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.relative and rel <= self.relative[-1]:
            return
        self.relative.append(rel)
        self.positions.append(position)
        self._pending += OFFSET_ENTRY.pack(rel, position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch at or before `offset` (0 when none is)."""
        i = bisect_right(self.relative, offset - self.base_offset)
        return self.positions[i - 1] if i else 0

    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) if it is missing or fails the sanity checks."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % OFFSET_ENTRY.size:
            return False
        rel = array("i")
        pos = array("i")
        for r, p in OFFSET_ENTRY.iter_unpack(data):
            if (rel and (r <= rel[-1] or p <= pos[-1])) or p > log_size or r < 0:
                return False
            rel.append(r)
            pos.append(p)
        self.relative, self.positions, self._pending = rel, pos, bytearray()
        return True

    def reset(self) -> None:
        self.relative = array("i")
        self.positions = array("i")
        self._pending = bytearray()
        self.rewrite()

    def truncate_after(self, position: int) -> None:
        """Drop entries pointing at or beyond `position` (after the log was truncated there)."""
        keep = bisect_right(self.positions, position - 1)
        del self.relative[keep:]
        del self.positions[keep:]
        self.rewrite()

    def rewrite(self) -> None:
        data = b"".join(OFFSET_ENTRY.pack(r, p) for r, p in zip(self.relative, self.positions, strict=True))
        self.path.write_bytes(data)
        self._pending = bytearray()

    def flush(self) -> None:
        _append_durably(self.path, self._pending)
        self._pending = bytearray()


class TimeIndex:
    __slots__ = ("_pending", "base_offset", "path", "relative", "timestamps")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.relative = array("i")
        self._pending = bytearray()

    def __len__(self) -> int:
        return len(self.timestamps)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        rel = offset - self.base_offset
        self.timestamps.append(timestamp)
        self.relative.append(rel)
        self._pending += TIME_ENTRY.pack(timestamp, rel)

    def lookup(self, timestamp: int) -> int:
        """The offset of the last entry whose timestamp is below `timestamp`: a safe place to start."""
        i = bisect_right(self.timestamps, timestamp - 1)
        return self.base_offset + self.relative[i - 1] if i else self.base_offset

    def load(self) -> bool:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % TIME_ENTRY.size:
            return False
        ts = array("q")
        rel = array("i")
        for t, r in TIME_ENTRY.iter_unpack(data):
            if ts and (t <= ts[-1] or r < rel[-1]):
                return False
            ts.append(t)
            rel.append(r)
        self.timestamps, self.relative, self._pending = ts, rel, bytearray()
        return True

    def reset(self) -> None:
        self.timestamps = array("q")
        self.relative = array("i")
        self._pending = bytearray()
        self.path.write_bytes(b"")

    def truncate_after(self, offset: int) -> None:
        keep = bisect_right(self.relative, offset - self.base_offset - 1)
        del self.timestamps[keep:]
        del self.relative[keep:]
        self.path.write_bytes(b"".join(TIME_ENTRY.pack(t, r)
                                       for t, r in zip(self.timestamps, self.relative, strict=True)))
        self._pending = bytearray()

    def flush(self) -> None:
        _append_durably(self.path, self._pending)
        self._pending = bytearray()
