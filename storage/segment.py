"""One log segment: a `.log` file of record batches exactly as on the wire, and its sparse indexes.

Appends go to the end with one write; an offset index entry is added every `index.interval.bytes` of
log, keyed by the appended batch's last offset and pointing at its position, so a lookup lands at or
before the batch holding any offset and a short forward scan of batch headers finds it. Reads never
copy records: they return a (position, length) range of whole batches for `os.sendfile`.
"""

from __future__ import annotations

import io
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

from pybroker.protocol.records.batch import HEADER_SIZE, MIN_BATCH_LENGTH, BatchHeader, crc_ok, parse_header
from pybroker.storage.index import OffsetIndex, TimeIndex

SCAN_CHUNK = 64 * 1024
MAGIC_V2 = 2


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class Segment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int) -> None:
        self.base_offset = base_offset
        self.log_path = directory / segment_name(base_offset, ".log")
        self.file = io.FileIO(self.log_path, "a+")
        self.size = os.fstat(self.file.fileno()).st_size
        self.index = OffsetIndex(directory / segment_name(base_offset, ".index"), base_offset)
        self.timeindex = TimeIndex(directory / segment_name(base_offset, ".timeindex"), base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_timestamp: int | None = None
        self.created_ms = created_ms
        self.bytes_since_index = 0
        self.flushed_size = self.size

    # -- writing -----------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]],
               last_offsets: list[int]) -> None:
        """Write `data` (whole batches, offsets already assigned) and index them."""
        position = self.size
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.write(self.file.fileno(), view[written:])
        for (pos, header), last_offset in zip(batches, last_offsets, strict=True):
            self._track(position + pos, header, last_offset)
        self.size += len(view)

    def _track(self, position: int, header: BatchHeader, last_offset: int) -> None:
        if self.first_timestamp is None:
            self.first_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_index >= self.index_interval_bytes or position == 0:
            self.index.append(last_offset, position)
            self.timeindex.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index = 0
        self.bytes_since_index += header.size
        self.next_offset = last_offset + 1

    def flush(self) -> None:
        os.fsync(self.file.fileno())
        self.index.flush()
        self.timeindex.flush()

    def close(self) -> None:
        try:
            self.index.flush()
            self.timeindex.flush()
        finally:
            self.file.close()

    def truncate(self, position: int) -> None:
        """Cut the file at `position` (a batch boundary) and drop index entries past it."""
        os.ftruncate(self.file.fileno(), position)
        self.size = position
        self.index.truncate_after(position)
        self.rebuild_state(from_position=self.index.last_position(), check_crc=False)
        self.timeindex.truncate_after(self.next_offset)

    # -- reading -----------------------------------------------------------------------------
    def scan(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from `start`, reading headers only."""
        fd = self.file.fileno()
        end = self.size if end is None else end
        pos = start
        while end - pos >= HEADER_SIZE:
            chunk = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
            off = 0
            while len(chunk) - off >= HEADER_SIZE:
                header = parse_header(chunk, off)
                if header.batch_length < MIN_BATCH_LENGTH or pos + off + header.size > end:
                    return
                yield pos + off, header
                off += header.size
            if off == 0:
                return
            pos += off

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is at or after `offset`."""
        for pos, header in self.scan(self.index.lookup(offset)):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> tuple[int, int] | None:
        """(position, length) of whole batches from the one holding `offset`, within the limits."""
        found = self.find(offset)
        if found is None:
            return None
        start, first = found
        if first.base_offset >= max_offset or (first.size > max_bytes and not min_one_batch):
            return None
        length = first.size
        for pos, header in self.scan(start + first.size):
            if header.base_offset >= max_offset or length + header.size > max_bytes:
                break
            length = pos + header.size - start
        return start, length

    def read_bytes(self, position: int, length: int) -> bytes:
        return os.pread(self.file.fileno(), length, position)

    # -- loading and recovery ----------------------------------------------------------------
    def rebuild_state(self, from_position: int = 0, check_crc: bool = False) -> int:
        """Re-derive end offset, timestamps and index entries from the file; with `check_crc`, validate
        every batch and truncate at the first bad one. Returns the bytes truncated."""
        if from_position == 0:
            self.index.reset()
            self.timeindex.reset()
            self.max_timestamp, self.offset_of_max_timestamp = -1, -1
            self.first_timestamp = None
            self.next_offset = self.base_offset
        self.bytes_since_index = 0
        valid_end = from_position
        expected = self.next_offset if from_position == 0 else None
        mapped = self._map()
        try:
            for pos, header in self.scan(from_position):
                if header.magic != MAGIC_V2 or (expected is not None and header.base_offset < expected):
                    break
                if check_crc and (mapped is None or not crc_ok(mapped, pos, header)):
                    break
                if from_position and pos == from_position:
                    self.next_offset = header.last_offset + 1
                    self.bytes_since_index = header.size
                    valid_end = pos + header.size
                    self._note_timestamp(header)
                    continue
                self._track(pos, header, header.last_offset)
                expected = header.last_offset + 1
                valid_end = pos + header.size
        finally:
            if mapped is not None:
                mapped.close()
        truncated = self.size - valid_end
        if truncated > 0:
            os.ftruncate(self.file.fileno(), valid_end)
            self.size = valid_end
        return max(truncated, 0)

    def _note_timestamp(self, header: BatchHeader) -> None:
        if self.first_timestamp is None:
            self.first_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset

    def _map(self) -> mmap.mmap | None:
        if self.size == 0:
            return None
        return mmap.mmap(self.file.fileno(), self.size, prot=mmap.PROT_READ)

    def load(self, trust_indexes: bool) -> int:
        """Open an existing segment: fast when its indexes are trusted and sane, else a full rebuild
        (with CRC checks when not trusted). Returns the bytes truncated."""
        if trust_indexes and self.index.load(self.size) and self.timeindex.load():
            if len(self.timeindex):
                self.max_timestamp = self.timeindex.timestamps[-1]
                self.offset_of_max_timestamp = self.base_offset + self.timeindex.relative[-1]
            start = self.index.last_position()
            self.next_offset = self.base_offset
            first = next(self.scan(0), None)
            if first is not None:
                self.first_timestamp = first[1].max_timestamp
            return self.rebuild_state(from_position=start, check_crc=False) if self.size else 0
        return self.rebuild_state(0, check_crc=not trust_indexes)

    def delete_files(self) -> None:
        self.file.close()
        for path in (self.log_path, self.index.path, self.timeindex.path):
            path.unlink(missing_ok=True)
