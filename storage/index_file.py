"""What Kafka's two sparse segment indexes share: fixed-size big-endian entries in a preallocated file.

Kafka preallocates an active segment's index files to `segment.index.bytes` (rounded down to whole
entries) and trims them to their real length when the segment rolls or closes; readers take the
entries up to the last non-zero one. We keep that file layout exactly, so Kafka's tools read our
indexes, but hold the entries in memory as two native arrays (one per field) for bisecting: no
per-lookup unpacking. New entries are buffered and written when the index is trimmed (segment roll or
close) or once a few hundred bytes of them have gathered; the active segment's index is always rebuilt
after a crash, so nothing is lost by waiting.

Threads: entries are added, trimmed and truncated by the log's owner (the event loop, or the startup
and shutdown paths); the flusher thread only calls `sync()`.
"""

from __future__ import annotations

import operator
import os
import sys
from array import array
from pathlib import Path
from struct import Struct
from typing import ClassVar, Self

from pybroker.storage.errors import CorruptIndexError
from pybroker.storage.files import pwrite_fully

#: buffered entries are written out once they reach this size (one `pwrite` per ~64 entries)
PENDING_WRITE_BYTES = 512


def _column(data: bytes, count: int, entry_size: int, field_offset: int, typecode: str) -> array:
    """One field of every entry, as a native array: strided copies, no per-entry Python work."""
    column = array(typecode)
    width = column.itemsize
    raw = bytearray(count * width)
    for byte in range(width):
        raw[byte::width] = data[field_offset + byte : count * entry_size : entry_size]
    column.frombytes(bytes(raw))
    if sys.byteorder == "little":
        column.byteswap()
    return column


class IndexFile:
    """Entries (key, value) with both fields signed big-endian integers, keys non-decreasing."""

    ENTRY: ClassVar[Struct]
    KEY_TYPE: ClassVar[str]
    VALUE_TYPE: ClassVar[str]

    __slots__ = ("_pending", "_preallocated", "_written", "base_offset", "dirty", "keys", "max_entries",
                 "new_name", "path", "values")

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_index_bytes, 0) // self.ENTRY.size
        self.keys = array(self.KEY_TYPE)
        self.values = array(self.VALUE_TYPE)
        self._pending = bytearray()  # encoded entries not yet in the file
        self._written = 0  # entries already in the file
        self._preallocated = False
        self.dirty = False  # the file changed since the last fsync
        #: this object made the file: its name is durable only once the dir is fsynced (`Segment.take_new_names`)
        self.new_name = False

    # -- opening -----------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, base_offset: int, max_index_bytes: int) -> Self:
        """A new empty index for an active segment, its file preallocated (sparse, so free)."""
        index = cls(path, base_offset, max_index_bytes)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, index.max_entries * cls.ENTRY.size)
        finally:
            os.close(fd)
        index._preallocated = True
        index.dirty = index.new_name = True
        return index

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_bytes: int) -> Self:
        """Read an index file; trailing all-zero entries are unwritten preallocated space.

        Raises `FileNotFoundError` or `CorruptIndexError` (from `check`) for the caller to rebuild.
        """
        data = path.read_bytes()
        size = cls.ENTRY.size
        if len(data) % size:
            raise CorruptIndexError(f"{path} holds {len(data)} bytes, not a whole number of entries")
        used = len(data.rstrip(b"\0"))
        count = -(-used // size)
        index = cls(path, base_offset, max_index_bytes)
        index.keys = _column(data, count, size, 0, cls.KEY_TYPE)
        index.values = _column(data, count, size, index.keys.itemsize, cls.VALUE_TYPE)
        index._written = count
        index._preallocated = len(data) > count * size
        index.check()
        return index

    def check(self) -> None:
        """Sanity checks after loading (Kafka's `sanityCheck`, plus order); raise `CorruptIndexError`."""

    @staticmethod
    def _increasing(column: array, *, strictly: bool) -> bool:
        """Whether a column is in order: one C-level pass, fast enough for a lazily loaded index."""
        return all(map(operator.lt if strictly else operator.le, column, column[1:]))

    # -- entries -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def _add(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)
        self._pending += self.ENTRY.pack(key, value)
        if len(self._pending) >= PENDING_WRITE_BYTES:  # keep the file close to current for tools
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                self._write_pending(fd)
            finally:
                os.close(fd)

    def truncate_to_entries(self, count: int) -> None:
        """Keep the first `count` entries, in memory and in the file."""
        if count >= len(self.keys):
            return
        del self.keys[count:]
        del self.values[count:]
        size = self.ENTRY.size
        if count >= self._written:
            del self._pending[(count - self._written) * size :]
            return
        self._pending = bytearray()
        self._written = count
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, count * size)  # drop the stale entries...
            if self._preallocated:  # ...and give back zeroed room after them
                os.ftruncate(fd, max(self.max_entries, count) * size)
        finally:
            os.close(fd)
        self.dirty = True

    def reset(self) -> None:
        self.truncate_to_entries(0)

    # -- the file ----------------------------------------------------------------------------------
    def _write_pending(self, fd: int) -> None:
        if self._pending:
            pwrite_fully(fd, self._pending, self._written * self.ENTRY.size)
            self._written += len(self._pending) // self.ENTRY.size
            self._pending = bytearray()
            self.dirty = True

    def trim(self) -> None:
        """Write buffered entries and cut the file to its entries (Kafka's `trimToValidSize`)."""
        if not self._pending and not self._preallocated:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._write_pending(fd)
            os.ftruncate(fd, len(self.keys) * self.ENTRY.size)
        finally:
            os.close(fd)
        self._preallocated = False
        self.dirty = True

    def preallocate(self, max_index_bytes: int) -> None:
        """Grow the file to the full index size so the segment can take new entries (it is active)."""
        self.max_entries = max(max_index_bytes, 0) // self.ENTRY.size
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._write_pending(fd)
            os.ftruncate(fd, max(self.max_entries, len(self.keys)) * self.ENTRY.size)
        finally:
            os.close(fd)
        self._preallocated = True
        self.dirty = True

    def sync(self) -> None:
        """fsync the file if it changed since the last sync."""
        if not self.dirty:
            return
        self.dirty = False
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        except BaseException:
            self.dirty = True
            raise
        finally:
            os.close(fd)

    def to_bytes(self) -> bytes:
        """Every entry as the file holds them (for tests and tools)."""
        return b"".join(self.ENTRY.pack(k, v) for k, v in zip(self.keys, self.values, strict=True))
