"""One partition's log: ordered segments, offset assignment, reads, time lookups, flushing, recovery.

Appends and reads run on the broker's event-loop thread; `flush` runs on the log dir's flusher thread.
A small lock guards only the segment list and the flushed mark, never an fsync, so a flush cannot
stall an append. The recovery point (everything below it is fsynced) is taken *before* fsyncing and
published after, so it never runs ahead of what is durable.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pybroker.protocol.records.batch import BatchHeader, patch_base_offset, patch_leader_epoch
from pybroker.protocol.records.record import decode_records
from pybroker.storage.errors import OffsetOutOfRange
from pybroker.storage.log_config import LogConfig
from pybroker.storage.producer_state import ProducerState
from pybroker.storage.segment import Segment

MAX_RELATIVE_OFFSET = 2**31 - 1


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_start_offset: int
    duplicate: bool = False


class FileRegion:
    """A byte range of a segment file, sent with `os.sendfile` or read with `pread`."""

    __slots__ = ("file", "length", "position")

    def __init__(self, file: Any, position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read_bytes(self) -> bytes:
        return os.pread(self.file.fileno(), self.length, self.position)


@dataclass(slots=True)
class ReadResult:
    region: FileRegion | None


@dataclass(slots=True)
class RecoveryStats:
    segments_recovered: int = 0
    bytes_truncated: int = 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
    def __init__(self, directory: Path, topic: str, partition: int, topic_id: uuid.UUID, config: LogConfig,
                 *, recovery_point: int = 0, log_start_offset: int = 0, clean: bool = True) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.config = config
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        self.stats = RecoveryStats()
        self._lock = threading.Lock()
        self.segments: list[Segment] = []
        self.producer_state = ProducerState(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._load(clean)

    # -- loading -----------------------------------------------------------------------------
    def _load(self, clean: bool) -> None:
        for tmp in self.dir.glob("*.tmp"):
            tmp.unlink(missing_ok=True)
        bases = sorted(int(p.name[:20]) for p in self.dir.glob("*.log") if p.name[:20].isdigit())
        now = _now_ms()
        for i, base in enumerate(bases):
            segment = Segment(self.dir, base, self.config.index_interval_bytes, now)
            trusted = clean or (segment.base_offset < self.recovery_point and (
                i + 1 < len(bases) and bases[i + 1] <= self.recovery_point))
            truncated = segment.load(trust_indexes=trusted)
            if not trusted:
                self.stats.segments_recovered += 1
            self.stats.bytes_truncated += truncated
            if segment.first_timestamp is not None:
                segment.created_ms = segment.first_timestamp
            self.segments.append(segment)
            if truncated:
                # nothing after a damaged segment can be trusted to follow it
                for later in bases[i + 1 :]:
                    doomed = Segment(self.dir, later, self.config.index_interval_bytes, now)
                    self.stats.bytes_truncated += doomed.size
                    doomed.delete_files()
                break
        if not self.segments:
            start = max(self.log_start_offset, 0)
            self.segments.append(Segment(self.dir, start, self.config.index_interval_bytes, now))
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        if not clean:
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._load_producer_state()

    def _load_producer_state(self) -> None:
        start = self.producer_state.load_latest(self.log_end_offset)
        for segment in self.segments:
            if segment.next_offset <= start:
                continue
            for _, header in segment.scan(segment.index.lookup(start) if segment.base_offset < start else 0):
                if header.last_offset < start or header.producer_id < 0:
                    continue
                self.producer_state.update(header, header.base_offset, header.last_offset)

    # -- offsets -----------------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    # -- appending ---------------------------------------------------------------------------
    def append(self, records: Any, batches: list[tuple[int, BatchHeader]], *, now_ms: int,
               leader_epoch: int = 0) -> AppendResult:
        """Assign offsets from the log end (patching the caller's buffer in place) and write."""
        for _, header in batches:
            if header.producer_id >= 0:
                original = self.producer_state.check(header)
                if original is not None:
                    return AppendResult(original.first_offset, original.last_offset, self.log_start_offset, True)
        size = len(records)
        self._maybe_roll(size, now_ms, batches)
        next_offset = self.log_end_offset
        base = next_offset
        last_offsets: list[int] = []
        for pos, header in batches:
            patch_base_offset(records, pos, next_offset)
            patch_leader_epoch(records, pos, leader_epoch)
            next_offset += header.last_offset_delta + 1
            last_offsets.append(next_offset - 1)
        self.active.append(records, batches, last_offsets)
        for (_, header), last in zip(batches, last_offsets, strict=True):
            if header.producer_id >= 0:
                self.producer_state.update(header, last - header.last_offset_delta, last)
        self.unflushed_messages += sum(h.records_count for _, h in batches)
        return AppendResult(base, next_offset - 1, self.log_start_offset)

    def _maybe_roll(self, size: int, now_ms: int, batches: list[tuple[int, BatchHeader]]) -> None:
        active = self.active
        if active.size == 0:
            return
        last_delta = sum(h.last_offset_delta + 1 for _, h in batches)
        full = active.size + size > self.config.segment_bytes
        old = now_ms - active.created_ms > self.config.segment_ms - self.config.segment_jitter_ms
        index_full = len(active.index) * 8 >= self.config.max_index_bytes - 8
        overflow = self.log_end_offset + last_delta - active.base_offset > MAX_RELATIVE_OFFSET
        if full or old or index_full or overflow:
            self.roll(now_ms)

    def roll(self, now_ms: int | None = None) -> Segment:
        now_ms = _now_ms() if now_ms is None else now_ms
        base = self.log_end_offset
        segment = Segment(self.dir, base, self.config.index_interval_bytes, now_ms)
        segment.next_offset = base
        with self._lock:
            self.segments.append(segment)
        self.producer_state.write_snapshot(base)
        return segment

    # -- reading -----------------------------------------------------------------------------
    def _segment_index(self, offset: int) -> int:
        bases = [s.base_offset for s in self.segments]
        return max(bisect_right(bases, offset) - 1, 0)

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRange(offset, self.log_start_offset, end)
        limit = end if max_offset is None else min(max_offset, end)
        if offset >= limit:
            return ReadResult(None)
        segments = self.segments
        for segment in segments[self._segment_index(offset):]:
            if segment.next_offset <= offset:
                continue
            found = segment.read(offset, max_bytes, limit, min_one_batch)
            if found is None:
                return ReadResult(None)
            return ReadResult(FileRegion(segment.file, found[0], found[1]))
        return ReadResult(None)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """The first record with a timestamp at or after `timestamp`: (offset, its timestamp)."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            start_offset = max(segment.timeindex.lookup(timestamp), self.log_start_offset)
            for pos, header in segment.scan(segment.index.lookup(start_offset)):
                if header.max_timestamp < timestamp or header.last_offset < self.log_start_offset:
                    continue
                return self._record_at_or_after(segment, pos, header, timestamp)
        return None

    def _record_at_or_after(self, segment: Segment, pos: int, header: BatchHeader,
                            timestamp: int) -> tuple[int, int]:
        if header.timestamp_type == 1:  # LogAppendTime: every record has the batch's max timestamp
            return max(header.base_offset, self.log_start_offset), header.max_timestamp
        raw = segment.read_bytes(pos, header.size)
        for record in decode_records(raw, 0, header):
            ts = header.base_timestamp + record.timestamp_delta
            offset = header.base_offset + record.offset_delta
            if ts >= timestamp and offset >= self.log_start_offset:
                return offset, ts
        return header.last_offset, header.max_timestamp

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(largest timestamp, offset of its record) over the log; (-1, -1) when empty."""
        best = (-1, -1)
        for segment in self.segments:
            if segment.max_timestamp > best[0]:
                best = (segment.max_timestamp, segment.offset_of_max_timestamp)
        if best[1] < 0:
            return best
        segment = self.segments[self._segment_index(best[1])]
        found = segment.find(best[1])
        if found is not None and found[1].timestamp_type == 0:
            pos, header = found
            for record in decode_records(segment.read_bytes(pos, header.size), 0, header):
                if header.base_timestamp + record.timestamp_delta == header.max_timestamp:
                    return header.max_timestamp, header.base_offset + record.offset_delta
        return best

    # -- durability --------------------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> int:
        """fsync everything appended so far; returns the new recovery point."""
        with self._lock:
            target = self.log_end_offset
            segments = [s for s in self.segments if s.next_offset > self.recovery_point or s is self.segments[-1]]
            pending = self.unflushed_messages
        if target <= self.recovery_point and up_to is not None and up_to <= self.recovery_point:
            return self.recovery_point
        for segment in segments:
            segment.flush()
        with self._lock:
            self.recovery_point = max(self.recovery_point, target)
            self.unflushed_messages = max(self.unflushed_messages - pending, 0)
            self.last_flush_ms = _now_ms()
        return self.recovery_point

    def write_producer_snapshot(self) -> None:
        self.producer_state.write_snapshot(self.log_end_offset)

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)
