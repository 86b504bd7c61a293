"""One clean of one log (Kafka's `Cleaner.doClean`): map the dirty section, recopy, swap.

1. The offset map is filled from the first dirty offset towards the first uncleanable one with the
   latest offset of every key. When it cannot take another key, the clean covers only what it mapped
   (the end offset is one past the last mapped record) and the next clean continues from there: a
   segment with far more keys than the map holds is cleaned over several passes, never refused.
2. Every inactive segment below the end offset is recopied, in groups (`grouping`), keeping what
   `batch_filter` keeps, into a `.cleaned` segment that is fsynced and then swapped in (`swap`) under
   the log's segment lock, one group at a time.

Transactions (`transactions`): batches of aborted transactions map no key and are removed; markers go
once their transaction's data is gone and their delete horizon passed; the cleaned segment gets a
`.txnindex` of the aborts whose markers it keeps. Unlike Kafka, which starts afresh for each group of
segments, one clean walks its groups with one transaction state: a COMMIT marker whose data lies in an
earlier group stays (without it, a replay of that data after a crash would leave the transaction open
and the last stable offset stuck), and an abort stays listed in the clean that removes its data. The last batch of every producer the log still
tracks stays (empty if need be), as Kafka keeps it, so producer state rebuilds the same way; for a
producer with no data batch left, that is its markers of its current epoch.

A batch whose records cannot be decoded (`batch_filter` explains why some logs hold them) maps no key
and is recopied byte for byte; the clean reports those it met in the section it mapped
(`CleanResult.malformed`), so each is reported once, not at every later clean that recopies it.

The caller (the manager) records the end offset as the log's new first dirty offset once `clean`
returns. Everything here runs on a cleaner thread, or (the default) in the cleaner's worker process on a
read-only view of the log (`clean_segments`, `worker`), which asks the broker to do each swap
(`replace_group`); the log's readers and writers on the event loop are never blocked for more than a
swap's renames. `should_stop` is polled between batches: when it says
so, the clean unwinds with `CleaningAborted`, deleting its unfinished output.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    RecordsError,
    crc_ok,
    iter_batches,
    parse_header,
)
from pybroker.protocol.records.record import decode_records
from pybroker.storage.cleaner.batch_filter import FilterStats, filter_batch
from pybroker.storage.cleaner.cleaned_segment import CleanedSegment
from pybroker.storage.cleaner.grouping import SegmentSize, group_by_size
from pybroker.storage.cleaner.offset_map import OffsetMap
from pybroker.storage.cleaner.swap import StepHook, no_hook, swap_in
from pybroker.storage.cleaner.throttle import Throttler
from pybroker.storage.cleaner.transactions import CleanedTransactions, marker_type
from pybroker.storage.files import fsync_dir
from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig
from pybroker.storage.segment import Segment
from pybroker.storage.transaction_index import AbortedTxn

#: bytes read from a source segment at a time (batches larger than this are read whole)
READ_CHUNK = 1 << 20


class CleaningAborted(Exception):
    """The clean stopped before finishing (shutdown, or the log changed under it); nothing was lost."""


class _Readable(Protocol):
    def fileno(self) -> int: ...


class SourceSegment(Protocol):
    """What a clean reads of an inactive segment: a live `Segment`, or a worker's `log_view.SegmentView`."""

    @property
    def base_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def index(self) -> Sized: ...
    @property
    def timeindex(self) -> Sized: ...
    @property
    def file(self) -> _Readable: ...
    @property
    def log_path(self) -> Path: ...
    def find(self, offset: int) -> tuple[int, object] | None: ...


class SourceLog(Protocol):
    """What a clean reads of a log: a live `Log`, or a worker's `log_view.LogView`."""

    @property
    def dir(self) -> Path: ...
    @property
    def config(self) -> LogConfig: ...
    def aborted_txns(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]: ...


@dataclass(frozen=True, slots=True)
class MalformedBatch:
    """A batch of the mapped section whose records could not be decoded: kept whole, keys not mapped."""

    base_offset: int
    last_offset: int
    reason: str


@dataclass(slots=True)
class CleanResult:
    """What one clean did; `end_offset` becomes the log's first dirty offset."""

    end_offset: int
    bytes_read: int = 0
    bytes_written: int = 0
    segments_before: int = 0
    segments_after: int = 0
    map_keys: int = 0
    filter: FilterStats = field(default_factory=FilterStats)
    #: undecodable batches met in the section this clean mapped (each reported by one clean only)
    malformed: list[MalformedBatch] = field(default_factory=list)

    @property
    def bytes_reclaimed(self) -> int:
        return max(self.bytes_read - self.bytes_written, 0)


def _never_stop() -> bool:
    return False


class Cleaner:
    """Cleans logs with one offset map (one per cleaner thread) and the shared throttle."""

    def __init__(self, offset_map: OffsetMap, throttler: Throttler, *,
                 should_stop: Callable[[], bool] = _never_stop, swap_hook: StepHook = no_hook,
                 read_chunk: int = READ_CHUNK) -> None:
        self.offset_map = offset_map
        self.throttler = throttler
        self.should_stop = should_stop
        self.swap_hook = swap_hook
        self.read_chunk = read_chunk

    def close(self) -> None:
        """Give the offset map's memory back."""
        self.offset_map.close()

    def clean(self, log: Log, first_dirty: int, first_uncleanable: int, now_ms: int) -> CleanResult:
        """Clean `log` from `first_dirty` up to (at most) `first_uncleanable`, which must not be past the
        active segment's base offset."""
        segments = [s for s in log.segments[:-1] if s.base_offset < first_uncleanable]
        return self.clean_segments(log, segments, first_dirty, first_uncleanable, now_ms,
                                   last_batch_of_producers(log))

    def clean_segments(self, log: SourceLog, segments: Sequence[SourceSegment], first_dirty: int,
                       first_uncleanable: int, now_ms: int, producers: dict[int, tuple[int, int]]) -> CleanResult:
        """`clean` of the inactive `segments` below `first_uncleanable`, given the producers' last batches
        (the worker process cleans a view of the log the broker made, `log_view.LogView`)."""
        malformed: list[MalformedBatch] = []
        end = self._build_offset_map(log, segments, first_dirty, first_uncleanable, malformed)
        # a batch the map stopped short of is mapped, and reported, by the next clean
        result = CleanResult(end, map_keys=self.offset_map.size,
                             malformed=[m for m in malformed if m.last_offset < end])
        config = log.config
        sizes = [SegmentSize(s, s.base_offset, s.size, len(s.index), len(s.timeindex))
                 for s in segments if s.base_offset < end]
        groups = group_by_size(sizes, max_log_bytes=config.segment_bytes, max_index_bytes=config.max_index_bytes,
                               upper_bound=first_uncleanable)
        txns = CleanedTransactions()  # one walk over every group: a marker sees its data in earlier groups
        for group in groups:
            self._clean_group(log, group, end - 1, now_ms, producers, txns, result)
        result.segments_before = len(sizes)
        result.segments_after = len(groups)
        return result

    # -- pass 1 ------------------------------------------------------------------------------------
    def _build_offset_map(self, log: SourceLog, segments: Sequence[SourceSegment], start: int, end: int,
                          malformed: list[MalformedBatch]) -> int:
        """Map keys from `start` towards `end`; returns one past the last offset the map covers.

        Undecodable batches are skipped (their keys stay unmapped) and appended to `malformed`; so are
        aborted transactions' batches (their records are going)."""
        offset_map = self.offset_map
        offset_map.clear()
        txns = CleanedTransactions()
        for segment in segments:
            if segment.next_offset <= start:
                continue
            txns.add_aborted(log.aborted_txns(max(segment.base_offset, start), segment.next_offset))
            found = segment.find(start) if segment.base_offset < start else None
            position = found[0] if found is not None else 0
            for header, raw in self._batches(segment, position):
                if header.is_control:
                    txns.on_marker(header, marker_type(raw, header))
                    continue
                if txns.on_data_batch(header) or header.last_offset < start:
                    continue
                base = header.base_offset
                try:
                    records = decode_records(raw, 0, header)
                except RecordsError as exc:
                    malformed.append(MalformedBatch(base, header.last_offset, exc.message))
                    continue
                for record in records:
                    offset = base + record.offset_delta
                    if offset < start or offset >= end or record.key is None:
                        continue
                    if not offset_map.put(record.key, offset):
                        return offset_map.latest_offset + 1 if offset_map.latest_offset >= start else start
        return end

    # -- pass 2 ------------------------------------------------------------------------------------
    def _clean_group(self, log: SourceLog, group: Sequence[SourceSegment], latest_offset: int, now_ms: int,
                     producers: dict[int, tuple[int, int]], txns: CleanedTransactions, result: CleanResult) -> None:
        config = log.config
        output = CleanedSegment(log.dir, group[0].base_offset, max_index_bytes=config.max_index_bytes,
                                index_interval_bytes=config.index_interval_bytes)
        try:
            for i, segment in enumerate(group):
                result.bytes_read += segment.size
                upper = group[i + 1].base_offset if i + 1 < len(group) else segment.next_offset
                txns.add_aborted(log.aborted_txns(segment.base_offset, upper))
                for header, raw in self._batches(segment, 0):
                    if header.is_control:
                        discardable = txns.on_marker(header, marker_type(raw, header))
                    else:
                        discardable = txns.on_data_batch(header)
                    kept = filter_batch(raw, header, self.offset_map, latest_offset=latest_offset, now_ms=now_ms,
                                        delete_retention_ms=config.delete_retention_ms,
                                        retain_empty=_last_of_producer(producers, header),
                                        stats=result.filter, discardable=discardable)
                    if kept is not None:
                        output.append(kept, header if kept is raw else parse_header(kept))
                        self.throttler.maybe_throttle(len(kept))
            output.txn_entries = txns.take_kept_aborts()
            output.finish()
            if not self.replace(log, group, output):
                raise CleaningAborted(f"{log!r} changed while it was being cleaned")
        except BaseException:
            output.abandon()
            raise
        result.bytes_written += output.size

    def replace(self, log: SourceLog, group: Sequence[SourceSegment], output: CleanedSegment) -> bool:
        """Swap the finished `output` in for `group`; False when the log changed meanwhile. (The worker
        process's cleaner asks the broker to do this instead.)"""
        return replace_group(cast(Log, log), cast(list[Segment], list(group)), output.base_offset, self.swap_hook)

    # -- reading -----------------------------------------------------------------------------------
    def _batches(self, segment: SourceSegment, position: int) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, bytes) of each whole batch of an inactive segment from `position`, CRC-checked,
        read in chunks and throttled; polls `should_stop` between batches."""
        end = segment.size
        while end - position >= HEADER_SIZE:
            # `segment.file` each time: it marks the file in use, so it is not closed as idle under us
            chunk = os.pread(segment.file.fileno(), min(self.read_chunk, end - position), position)
            self.throttler.maybe_throttle(len(chunk))
            used = 0
            for pos, header in iter_batches(chunk):
                if self.should_stop():
                    raise CleaningAborted("the cleaner is stopping")
                raw = chunk[pos : pos + header.size]
                if not crc_ok(raw, 0, header):
                    raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"batch at {segment.log_path}:{position + pos} "
                                                                  f"fails its CRC")
                yield header, raw
                used = pos + header.size
            if used == 0:  # a batch larger than the chunk: read it whole
                header = parse_header(chunk)
                if header.size > end - position or header.size <= len(chunk):
                    raise RecordsError(ErrorCode.CORRUPT_MESSAGE,
                                       f"unreadable batch at {segment.log_path}:{position}")
                chunk = os.pread(segment.file.fileno(), header.size, position)
                self.throttler.maybe_throttle(len(chunk))
                if not crc_ok(chunk, 0, header):
                    raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"batch at {segment.log_path}:{position} "
                                                                  f"fails its CRC")
                if self.should_stop():
                    raise CleaningAborted("the cleaner is stopping")
                yield header, chunk
                used = header.size
            position += used


def replace_group(log: Log, group: list[Segment], new_base: int, hook: StepHook = no_hook) -> bool:
    """Make the fsynced `.cleaned` segment at `new_base` live in place of `group` under the log's locks,
    and fsync the directory; False (nothing renamed) when `group` is no longer a run of the log's
    inactive segments."""
    for segment in group:  # readers may still hold these after the swap: keep them readable
        _ = segment.file, segment.index, segment.timeindex

    def swap() -> Segment:
        swap_in(log.dir, new_base, [s.base_offset for s in group], hook=hook)
        config = log.config
        return Segment.open_existing(log.dir, new_base, now_ms=group[-1].created_ms,
                                     max_index_bytes=config.max_index_bytes,
                                     index_interval_bytes=config.index_interval_bytes)

    if not log.replace_segments(group, swap):
        return False
    fsync_dir(log.dir)
    return True


def last_batch_of_producers(log: Log) -> dict[int, tuple[int, int]]:
    """producer id -> (last offset of its last data batch, or -1; its epoch), for the producers the log
    still tracks (Kafka's `lastRecordsOfActiveProducers`)."""
    producers = dict(log.producer_state.producers)  # one C-level copy: safe against the loop's updates
    last: dict[int, tuple[int, int]] = {}
    for producer_id, entry in producers.items():
        batches = list(entry.batches)
        last[producer_id] = (batches[-1].last_offset if batches else -1, entry.epoch)
    return last


def _last_of_producer(producers: dict[int, tuple[int, int]], header: BatchHeader) -> bool:
    """The batch holds a tracked producer's last sequence (its last data batch) or, for a producer with
    no data batch left, its current epoch (a marker): it stays, emptied if need be."""
    if header.producer_id < 0:
        return False
    found = producers.get(header.producer_id)
    if found is None:
        return False
    last_data, epoch = found
    if last_data >= 0:
        return header.last_offset == last_data
    return header.is_control and header.producer_epoch == epoch
