"""One log segment: a `.log` file of record batches exactly as on the wire, and its sparse indexes.

Appends go to the end with one write; reads never copy records: they return a (position, length) range
of whole batches for `os.sendfile`. Finding an offset is an index lookup (in memory) and a short forward
scan of batch headers read with `pread`. Inactive segments are opened lazily, as Kafka does: their `.log`
file, their indexes and their largest timestamp are read on first use, so a broker with thousands of
segments starts fast after a clean shutdown. An index that fails its checks, is missing, or sends a lookup
to a place that is not the batch it names is rebuilt from the log. A `.log` file nobody used for a while
is let go (`detach_if_idle`) and opened again on next use, so open descriptors follow the partitions in use.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pybroker.protocol.records.batch import (
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    RecordsError,
    crc_ok,
    iter_batches,
)
from pybroker.protocol.records.record import decode_records
from pybroker.protocol.records.records_check import batch_problem
from pybroker.storage.errors import CorruptIndexError, LogClosedError
from pybroker.storage.files import write_fully
from pybroker.storage.offset_index import INT32_MAX, OffsetIndex
from pybroker.storage.segment_names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    segment_path,
)
from pybroker.storage.time_index import NO_TIMESTAMP, TimeIndex
from pybroker.storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

#: bytes per `pread` hopping over batch headers: small first (a big batch needs only its header), then doubling
FIRST_SCAN_CHUNK = 1024
SCAN_CHUNK = 16384
#: where fields sit in the tuple `HEADER.unpack_from` returns (the order of `BatchHeader`)
_BASE_OFFSET, _LENGTH, _MAGIC, _LAST_OFFSET_DELTA = (
    BatchHeader._fields.index(name) for name in ("base_offset", "batch_length", "magic", "last_offset_delta"))
#: serialises lazy opening of `.log` files (a read on the loop and a flush on a flusher may race to it)
_OPEN_LOCK = threading.Lock()


def _open_log_file(path: Path, *, create: bool) -> io.FileIO:
    """The `.log` file for reading (`pread`, `sendfile`) and appending (O_APPEND: writes go to the end)."""
    flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_TRUNC if create else 0)
    fd = os.open(path, flags, 0o644)
    try:
        return io.FileIO(fd, "r+")
    except BaseException:
        os.close(fd)
        raise


class Segment:
    """A `.log` file and its `.index` / `.timeindex`, all named by the segment's base offset."""

    __slots__ = ("_bytes_since_index", "_file", "_index", "_max_timestamp", "_next_read", "_offset_of_max_timestamp",
                 "_rolling_timestamp", "_timeindex", "_txn_index", "_used", "active", "base_offset", "cache_counted_to",
                 "cache_dropped_to", "closed", "created_ms", "deleted_paths", "dir", "index_interval_bytes", "indexes_rebuilt",
                 "indexes_synced", "log_path", "max_index_bytes", "next_offset", "roll_jitter_ms", "size", "upper_bound")

    def __init__(self, directory: Path, base_offset: int, *, size: int, next_offset: int, created_ms: int,
                 roll_jitter_ms: int, max_index_bytes: int, index_interval_bytes: int) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX)
        self.size = size
        #: the page-cache budget dropped this file's pages below here (`storage.page_cache`): a read below
        #: it came from the disk, and drops what it read once it is sent
        self.cache_dropped_to = 0
        #: the page-cache budget counts this file's bytes up to here (fsynced, or written back)
        self.cache_counted_to = size
        #: one past the last offset in this segment (for a non-last segment: the next one's base offset)
        self.next_offset = next_offset
        #: for a non-last segment, the next segment's base offset: no batch here may reach it
        self.upper_bound: int | None = None
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        self.max_index_bytes = max_index_bytes
        self.index_interval_bytes = index_interval_bytes
        self.active = False
        self.closed = False
        #: the index files' contents reached the disk (only inactive segments' indexes are fsynced)
        self.indexes_synced = True
        self.indexes_rebuilt = 0
        self._file: io.FileIO | None = None
        #: the file was asked for since the last idle check
        self._used = False
        self._index: OffsetIndex | None = None
        self._timeindex: TimeIndex | None = None
        self._txn_index: TransactionIndex | None = None
        self._max_timestamp: int | None = None  # None: not read yet
        self._offset_of_max_timestamp = base_offset
        self._rolling_timestamp: int | None = None  # the first batch's max timestamp; None: not read yet
        self._bytes_since_index = 0
        #: after `mark_deleted`: the renamed files that `release` unlinks
        self.deleted_paths: list[Path] = []
        #: (position, raw header) of the batch right after the last region read: a consumer's next fetch
        #: starts there, and `find` answers it without an index lookup or a `pread`
        self._next_read: tuple[int, tuple[Any, ...]] | None = None

    # -- opening and creating ----------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int, *, now_ms: int, roll_jitter_ms: int,
               max_index_bytes: int, index_interval_bytes: int) -> Segment:
        """A new, empty, active segment (a stale file of the same name is emptied)."""
        segment = cls(directory, base_offset, size=0, next_offset=base_offset, created_ms=now_ms,
                      roll_jitter_ms=roll_jitter_ms, max_index_bytes=max_index_bytes,
                      index_interval_bytes=index_interval_bytes)
        segment._file = _open_log_file(segment.log_path, create=True)
        segment._index = OffsetIndex.create(segment.index_path, base_offset, max_index_bytes)
        segment._timeindex = TimeIndex.create(segment.timeindex_path, base_offset, max_index_bytes)
        segment._max_timestamp = NO_TIMESTAMP
        segment._rolling_timestamp = NO_TIMESTAMP
        segment.active = True
        segment.indexes_synced = False
        return segment

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int, *, now_ms: int, max_index_bytes: int,
                      index_interval_bytes: int) -> Segment:
        """An existing segment, opened lazily; the loader sets `next_offset` or recovers it."""
        path = segment_path(directory, base_offset, LOG_SUFFIX)
        return cls(directory, base_offset, size=path.stat().st_size, next_offset=base_offset,
                   created_ms=now_ms, roll_jitter_ms=0, max_index_bytes=max_index_bytes,
                   index_interval_bytes=index_interval_bytes)

    @property
    def index_path(self) -> Path:
        return segment_path(self.dir, self.base_offset, INDEX_SUFFIX)

    @property
    def timeindex_path(self) -> Path:
        return segment_path(self.dir, self.base_offset, TIME_INDEX_SUFFIX)

    @property
    def txnindex_path(self) -> Path:
        return segment_path(self.dir, self.base_offset, TXN_INDEX_SUFFIX)

    @property
    def txn_index(self) -> TransactionIndex:
        """The aborted transactions whose markers are in this segment (`.txnindex`, created when needed)."""
        if self._txn_index is None:
            self._txn_index = TransactionIndex(self.txnindex_path, self.base_offset)
        return self._txn_index

    @property
    def file(self) -> io.FileIO:
        """The open `.log` file (opened on first use)."""
        self._used = True
        file = self._file
        if file is None:
            with _OPEN_LOCK:
                if self.closed:
                    raise LogClosedError(f"segment {self.log_path} is closed")
                if self._file is None:
                    self._file = _open_log_file(self.log_path, create=False)
                file = self._file
        return file

    def detach_if_idle(self) -> io.FileIO | None:
        """The open `.log` file if nobody asked for it since the last call, now no longer the segment's (the
        next use opens it again; the caller closes it once reads are done); else None, the file now unused."""
        if self._file is None:
            return None
        if self._used:
            self._used = False
            return None
        with _OPEN_LOCK:
            file, self._file = self._file, None
        return file

    @property
    def index(self) -> OffsetIndex:
        if self._index is None:
            self._load_indexes()
        assert self._index is not None
        return self._index

    @property
    def timeindex(self) -> TimeIndex:
        if self._timeindex is None:
            self._load_indexes()
        assert self._timeindex is not None
        return self._timeindex

    def _load_indexes(self) -> None:
        """Read both index files, or rebuild them from the log if they are missing or fail checks."""
        try:
            index = OffsetIndex.load(self.index_path, self.base_offset, self.max_index_bytes)
            timeindex = TimeIndex.load(self.timeindex_path, self.base_offset, self.max_index_bytes)
            self._check_index_against_log(index)
        except (OSError, CorruptIndexError, RecordsError):
            self.recover(check_crc=True)
            return
        self._index, self._timeindex = index, timeindex

    def _check_index_against_log(self, index: OffsetIndex) -> None:
        if not len(index):
            return
        last_offset, position = index.last_entry()
        if position + HEADER_SIZE > self.size:
            raise CorruptIndexError(f"{index.path} points past the end of the log")
        header = self._header_at(position)
        if header.magic != MAGIC_V2 or header.last_offset != last_offset:
            raise CorruptIndexError(f"{index.path} does not match the batch at position {position}")

    # -- writing -----------------------------------------------------------------------------------
    def append(self, data: Any, batches: list[tuple[int, BatchHeader]]) -> None:
        """Write `data` (whole batches, offsets assigned; `batches` are their positions in `data` and
        final headers) at the end with one write, and index them as Kafka does."""
        fd = self.file.fileno()
        position = self.size
        try:
            write_fully(fd, data)
        except BaseException:
            with contextlib.suppress(OSError):  # leave no partial batch behind
                os.ftruncate(fd, position)
            raise
        index = self._index if self._index is not None else self.index
        timeindex = self._timeindex if self._timeindex is not None else self.timeindex
        max_ts = self._max_timestamp if self._max_timestamp is not None else self.max_timestamp
        max_ts_offset = self._offset_of_max_timestamp
        since = self._bytes_since_index
        interval = self.index_interval_bytes
        last = self.next_offset - 1
        for pos, header in batches:
            last = header.base_offset + header.last_offset_delta
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, last
            if since > interval:
                index.append(last, position + pos)
                timeindex.maybe_append(max_ts, max_ts_offset)
                since = 0
            since += header.batch_length + LOG_OVERHEAD
        if position == 0:
            self._rolling_timestamp = max(h.max_timestamp for _, h in batches)
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, max_ts_offset
        self._bytes_since_index = since
        self.size = position + len(data)
        self.next_offset = last + 1

    def should_roll(self, *, append_size: int, append_max_timestamp: int, append_last_offset: int,
                    segment_bytes: int, segment_ms: int, now_ms: int) -> bool:
        """Kafka's roll rules: full by size, old by time, an index full, or relative offsets overflow."""
        size = self.size
        if size == 0:
            return False
        if size > min(segment_bytes, INT32_MAX) - append_size:  # index positions are int32 too
            return True
        rolling = self._rolling_timestamp if self._rolling_timestamp is not None else self.rolling_timestamp
        waited = append_max_timestamp - rolling if rolling >= 0 else now_ms - self.created_ms
        if waited > segment_ms - self.roll_jitter_ms:
            return True
        index = self._index if self._index is not None else self.index
        if append_last_offset - self.base_offset > INT32_MAX or index.is_full:
            return True
        return (self._timeindex if self._timeindex is not None else self.timeindex).is_full

    def become_inactive(self) -> None:
        """On roll: record the largest timestamp in the time index and trim both index files."""
        self.indexes_synced = False
        timeindex = self.timeindex
        timeindex.maybe_append(self.max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        self.index.trim()
        timeindex.trim()
        self.active = False

    def make_active(self, max_index_bytes: int) -> None:
        """Prepare the last segment for appends: learn its end from the tail, preallocate its indexes."""
        self.max_index_bytes = max_index_bytes
        if not self._scan_tail():
            self.recover(check_crc=True)
        self.index.preallocate(max_index_bytes)
        self.timeindex.preallocate(max_index_bytes)
        self.active = True
        self.indexes_synced = False

    def _scan_tail(self) -> bool:
        """Set end offset, largest timestamp and index spacing by scanning from the last index entry.

        False when the tail is not a clean run of batches (the segment then needs recovery).
        """
        index = self.index
        last_offset, start = index.last_entry()
        max_ts, max_ts_offset = self.timeindex.last_entry()
        next_offset, end = self.base_offset, start
        for pos, header in self.headers(start):
            if header.magic != MAGIC_V2 or header.last_offset_delta < 0:
                return False
            if len(index) and pos == start:
                if header.last_offset != last_offset:
                    return False
            elif header.base_offset < next_offset:  # offsets must grow, from the segment's base on
                return False
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.last_offset
            next_offset, end = header.last_offset + 1, pos + header.size
        if end != self.size:
            return False
        self.next_offset = next_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, max_ts_offset
        self._bytes_since_index = end - start
        return True

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove the batch holding `offset` and everything after it; returns the bytes removed."""
        found = self.find(offset)
        if found is None:
            return 0
        position, header = found
        self._next_read = None
        self.index.truncate_to(header.base_offset)
        self.timeindex.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        removed = self.size - position
        os.ftruncate(self.file.fileno(), position)
        self.size = position
        self.cache_dropped_to = min(self.cache_dropped_to, position)
        self.cache_counted_to = min(self.cache_counted_to, position)
        self._rolling_timestamp = None
        if position == 0:
            self.created_ms = now_ms
        if not self._scan_tail():
            self.recover(check_crc=True)
        return removed

    # -- durability and lifetime -------------------------------------------------------------------
    def flush(self) -> int:
        """fdatasync the log; an inactive segment also fsyncs its (final) indexes, once. Returns the size
        this sync made durable (the page-cache budget counts up to it). fdatasync is enough for the log:
        it writes the data and the size (what recovery reads back), leaving out only timestamps. New names
        are made durable by the dir fsync in `Log.flush`; the indexes keep their full fsync (not hot)."""
        size = self.size  # before the sync: only what was written by then is sure to be on the disk
        os.fdatasync(self.file.fileno())
        if self._txn_index is not None:
            self._txn_index.sync()
        if not self.active and not self.indexes_synced:
            for index in (self._index, self._timeindex):
                if index is not None:
                    index.sync()
            self.indexes_synced = True
        return size

    def take_new_names(self) -> bool:
        """Whether an index file was made here since the last call (the flusher's, after `flush`): the dir
        is then fsynced before the recovery point passes it. A file the loop makes later keeps its flag."""
        made = False
        for index in (self._index, self._timeindex, self._txn_index):
            if index is not None and index.new_name:
                index.new_name, made = False, True
        return made

    def open_file(self) -> io.FileIO | None:
        """The `.log` file if it is open now (never opens it: for dropping its cached pages)."""
        return None if self.closed else self._file

    def close(self, *, sync: bool = True) -> None:
        """Trim the indexes (the time index gets its final entry, as Kafka does) and close the file."""
        if self.closed:
            return
        try:
            if self.active:
                self.become_inactive()
            if sync:
                for index in (self._index, self._timeindex):
                    if index is not None:
                        index.sync()
                if self._txn_index is not None:
                    self._txn_index.sync()
        finally:
            self.closed = True
            if self._file is not None:
                self._file.close()

    def delete_files(self, *, keep_open: bool = False) -> None:
        """Remove the segment's files. With `keep_open`, the open `.log` stays readable for regions
        already handed out (a pending `sendfile`) until `release()`; no new reads start."""
        self.closed = True
        if not keep_open:
            self.release()
        for path in (self.log_path, self.index_path, self.timeindex_path, self.txnindex_path):
            path.unlink(missing_ok=True)
        if self._txn_index is not None:
            self._txn_index.forget()

    def mark_deleted(self) -> None:
        """Kafka's asynchronous delete, first half: rename the files to `*.deleted` (no new reads start;
        the open `.log` stays readable for regions already handed out). `release` unlinks them; a crash
        in between leaves `.deleted` files, which the next startup removes."""
        self.closed = True
        for path in (self.log_path, self.index_path, self.timeindex_path, self.txnindex_path):
            doomed = path.with_name(path.name + DELETED_SUFFIX)
            try:
                os.rename(path, doomed)
            except FileNotFoundError:
                continue
            self.deleted_paths.append(doomed)

    def release(self) -> None:
        """Close the `.log` file (after `delete_files(keep_open=True)`, `mark_deleted` or `close`), and
        unlink what `mark_deleted` renamed."""
        self.closed = True
        if self._file is not None:
            self._file.close()
        for path in self.deleted_paths:
            path.unlink(missing_ok=True)
        self.deleted_paths = []

    # -- reading -----------------------------------------------------------------------------------
    def headers(self, start: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from `start`, reading headers only, in chunks."""
        make = BatchHeader._make
        for pos, raw in self._raw_headers(start, self.size if end is None else end):
            yield pos, make(raw)

    def _raw_headers(self, start: int, end: int) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """`headers` without building named tuples: the hot loop of every lookup."""
        fd = self.file.fileno()
        unpack = HEADER.unpack_from
        pos = start
        chunk_size = FIRST_SCAN_CHUNK
        while end - pos >= HEADER_SIZE:
            chunk = os.pread(fd, min(chunk_size, end - pos), pos)
            available = len(chunk) - HEADER_SIZE
            off = 0
            while off <= available:
                raw = unpack(chunk, off)
                length = raw[_LENGTH]
                if length < MIN_BATCH_LENGTH or pos + off + length + LOG_OVERHEAD > end:
                    return
                yield pos + off, raw
                off += length + LOG_OVERHEAD
            if off == 0:
                return
            pos += off
            # big batches: the next read needs little more than a header; small ones: read more at once
            chunk_size = FIRST_SCAN_CHUNK if off > len(chunk) else min(2 * chunk_size, SCAN_CHUNK)

    def _header_at(self, position: int) -> BatchHeader:
        raw = os.pread(self.file.fileno(), HEADER_SIZE, position)
        if len(raw) < HEADER_SIZE:
            raise CorruptIndexError(f"no batch header at {self.log_path}:{position}")
        return BatchHeader._make(HEADER.unpack_from(raw))

    def offset_at_position(self, position: int) -> int:
        """The base offset of the whole batch starting at `position`; -1 when none does (the end)."""
        if self.size - position < HEADER_SIZE:
            return -1
        raw = os.pread(self.file.fileno(), HEADER_SIZE, position)
        if len(raw) < HEADER_SIZE:
            return -1
        return int(HEADER.unpack_from(raw)[_BASE_OFFSET])

    def read_bytes(self, position: int, length: int) -> bytes:
        return os.pread(self.file.fileno(), length, position)

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is at or after `offset`: (position, header).

        The batch at an indexed position must end at exactly the indexed offset; if it does not, the
        index is damaged, and it is rebuilt rather than trusted.
        """
        found = self._find_raw(offset)
        if found is None:
            return None
        pos, raw = found
        return pos, raw if isinstance(raw, BatchHeader) else BatchHeader._make(raw)

    def _find_raw(self, offset: int) -> tuple[int, tuple[Any, ...]] | None:
        """`find` with the header as `HEADER.unpack_from` gives it (no named tuple built): the reads'."""
        hint = self._next_read  # the batch the last read stopped before: where a consumer asks next
        if hint is not None:
            raw = hint[1]
            if raw[_BASE_OFFSET] <= offset <= raw[_BASE_OFFSET] + raw[_LAST_OFFSET_DELTA]:
                return hint  # the batches before it end below its base
        entry = self.index.entry_at_or_before(offset)
        expected, start = entry if entry is not None else (None, 0)
        for pos, raw in self._raw_headers(start, self.size):
            last = raw[_BASE_OFFSET] + raw[_LAST_OFFSET_DELTA]
            if expected is not None:
                if raw[_MAGIC] != MAGIC_V2 or last != expected:
                    break
                expected = None
            if last >= offset:
                return pos, raw
        if expected is None:
            return None
        self.recover(check_crc=True)
        return next(((p, h) for p, h in self.headers(0) if h.last_offset >= offset), None)

    def read_region(self, offset: int, max_bytes: int, limit: int,
                    min_one_batch: bool) -> tuple[int, int, int] | None:
        """(position, length, next base offset) of whole batches from the one holding `offset`: at most
        `max_bytes` (but the first batch whole when `min_one_batch`), only batches ending before `limit`.
        The next base offset is that of the batch right after the region when the read met it, else -1.

        None when no batch here reaches `offset`; length 0 when the limits leave nothing to read.
        """
        found = self._find_raw(offset)  # past a fetch answer's first partitions, most reads end here
        if found is None:
            return None
        start, first = found
        size = first[_LENGTH] + LOG_OVERHEAD
        if first[_BASE_OFFSET] + first[_LAST_OFFSET_DELTA] >= limit or (size > max_bytes and not min_one_batch):
            # nothing read, so the consumer asks at this offset again: a fetch over many partitions
            # reaches most of them with its bytes spent, fetch after fetch, and each such ask is now a hit
            self._next_read = found
            return start, 0, -1
        first_end = start + size
        if size > max_bytes:
            return start, size, -1
        end_bound = self.size
        after = -1
        if limit < self.next_offset:
            bounded = self._find_raw(limit)
            if bounded is not None:
                end_bound, after = bounded[0], bounded[1][_BASE_OFFSET]
        byte_bound = start + max_bytes
        if end_bound <= byte_bound:
            return start, end_bound - start, after
        entry = self.index.entry_at_or_before_position(byte_bound)
        if entry is not None and entry[1] > first_end:  # skip the batches known to fit
            fitted = self._fitting_end(entry[1], byte_bound, end_bound, expected=entry[0])
            if fitted is not None:
                return start, fitted[0] - start, fitted[1]
            self.recover(check_crc=True)  # the index named a position that is not its batch
        fitted = self._fitting_end(first_end, byte_bound, end_bound, expected=None)
        assert fitted is not None
        return start, fitted[0] - start, fitted[1]

    def _fitting_end(self, start: int, byte_bound: int, end_bound: int,
                     expected: int | None) -> tuple[int, int] | None:
        """(end of the last whole batch from `start` that ends by `byte_bound`, base offset of the batch
        after it or -1); None if the batch at `start` is not the indexed one (`expected` last offset).
        The batch that did not fit is remembered for the next read (`find`)."""
        end = start
        for pos, raw in self._raw_headers(start, end_bound):
            if expected is not None:
                if raw[_MAGIC] != MAGIC_V2 or raw[_BASE_OFFSET] + raw[_LAST_OFFSET_DELTA] != expected:
                    return None
                expected = None
            size = raw[_LENGTH] + LOG_OVERHEAD
            if pos + size > byte_bound:
                self._next_read = (pos, raw)
                return end, raw[_BASE_OFFSET]
            end = pos + size
        return (end, -1) if expected is None else None

    # -- timestamps --------------------------------------------------------------------------------
    @property
    def max_timestamp(self) -> int:
        """The largest batch max timestamp in the segment (-1 when none), read lazily."""
        if self._max_timestamp is None:
            self._max_timestamp, self._offset_of_max_timestamp = self.timeindex.last_entry()
        return self._max_timestamp

    @property
    def rolling_timestamp(self) -> int:
        """The first batch's max timestamp, which time-based rolling counts from (-1 if none)."""
        if self._rolling_timestamp is None:
            first = next(self.headers(0), None)
            self._rolling_timestamp = first[1].max_timestamp if first is not None else NO_TIMESTAMP
        return self._rolling_timestamp

    def find_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp` with offset >= start_offset."""
        _, from_offset = self.timeindex.lookup(timestamp)
        first = self.find(max(from_offset, start_offset))
        if first is None:
            return None
        for pos, header in self.headers(first[0]):
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                found = self._record_in_batch(pos, header, start_offset, lambda ts: ts >= timestamp)
                if found is not None:
                    return found
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int]:
        """(largest timestamp, offset of the first record carrying it), as ListOffsets -3 answers."""
        max_ts = self.max_timestamp
        shallow = self._offset_of_max_timestamp
        found = self.find(shallow)
        if found is None or found[1].max_timestamp != max_ts:
            return max_ts, shallow
        record = self._record_in_batch(found[0], found[1], found[1].base_offset, lambda ts: ts == max_ts)
        return (max_ts, record[0]) if record is not None else (max_ts, shallow)

    def _record_in_batch(self, position: int, header: BatchHeader, start_offset: int,
                         wanted: Any) -> tuple[int, int] | None:
        """Decode one batch and return (offset, timestamp) of its first record that is `wanted`.

        A batch that cannot be decoded answers at batch level rather than failing the request.
        """
        try:
            records = decode_records(self.read_bytes(position, header.size), 0, header)
        except RecordsError:
            return max(header.base_offset, start_offset), header.max_timestamp
        append_time = header.timestamp_type == LOG_APPEND_TIME
        for record in records:
            offset = header.base_offset + record.offset_delta
            ts = header.max_timestamp if append_time else header.base_timestamp + record.timestamp_delta
            if offset >= start_offset and wanted(ts):
                return offset, ts
        return None

    # -- recovery ----------------------------------------------------------------------------------
    def recover(self, *, check_crc: bool,
                on_malformed: Callable[[int, str], None] | None = None) -> int:
        """Re-validate every batch from the start, rebuild both indexes, and cut the file at the first
        invalid batch (torn write, garbage, bad CRC, offsets out of order or reaching `upper_bound`).

        With `on_malformed`, every batch's records are also walked as the produce path walks them, and a
        batch whose records do not match its header is reported as `on_malformed(base_offset, problem)`
        but kept: its CRC covers it, so it was written whole (by a version that did not walk records),
        and cutting there would throw away every acknowledged record after it.

        Returns the bytes cut. Kafka's `LogSegment.recover`, with its index spacing rule. An active
        segment's rebuilt indexes stay preallocated; an inactive one's are trimmed.
        """
        upper_bound = self.upper_bound
        self._next_read = None
        fd = self.file.fileno()
        size = os.fstat(fd).st_size
        index = OffsetIndex.create(self.index_path, self.base_offset, self.max_index_bytes)
        timeindex = TimeIndex.create(self.timeindex_path, self.base_offset, self.max_index_bytes)
        valid = last_indexed = 0
        expected = self.base_offset
        max_ts, max_ts_offset = NO_TIMESTAMP, self.base_offset
        interval = self.index_interval_bytes
        mapped = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else None
        view = memoryview(mapped if mapped is not None else b"")  # protocol/ reads views, not maps
        try:
            for pos, header in iter_batches(view, 0, size):
                if not self._recoverable(view, pos, header, expected, upper_bound, check_crc):
                    break
                if on_malformed is not None:
                    problem = batch_problem(view, pos, header)
                    if problem is not None:
                        on_malformed(header.base_offset, problem)
                last = header.last_offset
                if header.max_timestamp > max_ts:
                    max_ts, max_ts_offset = header.max_timestamp, last
                if pos - last_indexed > interval:
                    index.append(last, pos)
                    timeindex.maybe_append(max_ts, max_ts_offset)
                    last_indexed = pos
                valid = pos + header.size
                expected = last + 1
        finally:
            view.release()
            if mapped is not None:
                mapped.close()
        if valid < size:
            os.ftruncate(fd, valid)
        self.txn_index.truncate_to(expected)  # markers cut with the tail; the log's replay re-adds the rest
        timeindex.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
        if not self.active:
            index.trim()
            timeindex.trim()
        self._index, self._timeindex = index, timeindex
        self.size = valid
        self.next_offset = expected if upper_bound is None else upper_bound
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, max_ts_offset
        self._rolling_timestamp = None
        self._bytes_since_index = valid - last_indexed
        self.indexes_synced = False
        self.indexes_rebuilt += 1
        return size - valid

    def _recoverable(self, buf: Any, pos: int, header: BatchHeader, expected: int, upper_bound: int | None,
                     check_crc: bool) -> bool:
        if header.magic != MAGIC_V2 or header.base_offset < expected or header.last_offset_delta < 0:
            return False
        if header.last_offset - self.base_offset > INT32_MAX:
            return False
        if upper_bound is not None and header.last_offset >= upper_bound:
            return False
        return not check_crc or crc_ok(buf, pos, header)
