"""One partition's log: ordered segments, offset assignment, reads, time lookups, flushing, truncation.

Threads: `append`, `read` and the lookups run on the broker's event-loop thread; `flush` runs on the
log dir's flusher thread (or the flush-policy worker). The segment list is replaced, never mutated, so a
flush works on a consistent snapshot without a lock that append needs. The flush lock is held during
fsync, but only against other flushes and against close/delete/truncate. A flush reads the log end
*before* fsyncing and publishes it as the recovery point after, so the recovery point never runs ahead
of what is durable (fsynced <= written <= appended).

The log cleaner replaces runs of inactive segments from its own thread (`replace_segments`). Every
change of the segment list therefore happens under `_segments_lock` (rolls take it too; it is only
ever held for list surgery and a few renames, never for I/O that waits on the disk), and the new
list is published bases-first, so a reader that picks up the old list with the new bases still lands
on or before the segment it wants and walks forward.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pybroker.protocol.records.batch import (
    BatchHeader,
    RecordsError,
    assign_offsets,
    parse_header,
    patch_base_offset,
    patch_leader_epoch,
)
from pybroker.protocol.records.control import build_marker_batch, read_marker
from pybroker.storage import timestamp_lookup
from pybroker.storage.clock import wall_clock_ms
from pybroker.storage.dir_names import renamed_dir_name
from pybroker.storage.errors import LogClosedError, OffsetOutOfRange
from pybroker.storage.file_region import NOTHING_TO_READ, FileRegion, ReadResult, unshared
from pybroker.storage.files import fsync_dir
from pybroker.storage.flush_timing import report_flush
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_loader import LoadStats, load_segments
from pybroker.storage.page_cache import UNLIMITED, PageCache
from pybroker.storage.producer_state import CompletedTxn, ProducerStateManager
from pybroker.storage.retention import KEEP, RetentionRules, Verdict, deletable_prefix
from pybroker.storage.segment import Segment
from pybroker.storage.time_index import NO_TIMESTAMP
from pybroker.storage.transaction_index import AbortedTxn

DELETE_SUFFIX = "-delete"
#: an idle file let go of stays open at least this long (even with file.delete.delay.ms=0): a thread that
#: took its descriptor just before (a read's header scan, the cleaner) finishes with it first
IDLE_CLOSE_GRACE_MS = 10_000


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_start_offset: int
    duplicate: bool = False


class Log:
    def __init__(self, directory: Path, topic: str, partition: int, topic_id: uuid.UUID, config: LogConfig,
                 *, recovery_point: int = 0, log_start_offset: int = 0, clean: bool = True,
                 clock_ms: Callable[[], int] | None = None, page_cache: PageCache = UNLIMITED) -> None:
        self.dir = Path(directory)
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.config = config
        self._clock = clock_ms or wall_clock_ms
        #: the broker's budget of log bytes left in the page cache (`storage.page_cache`)
        self.page_cache = page_cache
        self._flush_lock = threading.Lock()
        #: serialises changes of the segment list (rolls on the loop, the cleaner's swaps on its thread)
        self._segments_lock = threading.Lock()
        #: held by appends; a move between log dirs holds it (with the flush lock) while it swaps the log out
        self._write_lock = threading.Lock()
        self._closed = False
        #: removed segments whose `.log` stays open until their deadline, for reads already handed out
        self._retired: list[tuple[int, Segment]] = []
        #: idle `.log` files let go of (`close_idle_files`), closed once their delay passed and no read holds them
        self._idle_files: list[tuple[int, IO[bytes]]] = []
        #: segments whose `.txnindex` changed (the loop adds, the next flush takes): synced, names made durable
        self._txn_touched: list[Segment] = []
        self.dir.mkdir(parents=True, exist_ok=True)
        now = self._clock()
        loaded = load_segments(self.dir, config, clean=clean, recovery_point=recovery_point,
                               log_start_offset=log_start_offset, now_ms=now,
                               new_segment=lambda base: self._new_segment(base, now))
        self._segments: list[Segment] = loaded.segments
        self._bases = [s.base_offset for s in self._segments]
        self.log_start_offset = loaded.log_start_offset
        self._recovery_point = loaded.recovery_point
        self.load_stats: LoadStats = loaded.stats
        self.last_flush_ms = now
        self.producer_state = ProducerStateManager(self.dir)
        try:
            if not clean:  # a snapshot past the fsynced part may describe data the crash tore off
                self.producer_state.delete_snapshots(above=self._recovery_point)
            self._rebuild_producer_state(now)
        except BaseException:
            for segment in self._segments:
                segment.release()
            raise

    def __repr__(self) -> str:
        return f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, end={self.log_end_offset})"

    def _new_segment(self, base_offset: int, now_ms: int) -> Segment:
        config = self.config
        jitter_bound = min(config.segment_jitter_ms, config.segment_ms)
        return Segment.create(self.dir, base_offset, now_ms=now_ms,
                              roll_jitter_ms=random.randrange(jitter_bound) if jitter_bound > 0 else 0,
                              max_index_bytes=config.max_index_bytes,
                              index_interval_bytes=config.index_interval_bytes)

    def _rebuild_producer_state(self, now_ms: int) -> None:
        """Newest snapshot, then the producer batches after it (headers, and the markers' records).

        The replay is also what rebuilds the `.txnindex` files from the snapshot on: their entries for
        markers at or after it are dropped first and written again as the markers are met, so a
        segment recovered after a crash, or a truncated log, ends with exactly the aborts its log holds.
        """
        state = self.producer_state
        start = state.load(self.log_start_offset, self.log_end_offset, now_ms)
        for segment in self._segments:
            if segment.next_offset <= start:
                continue
            segment.txn_index.truncate_to(start)
            self._txn_touched.append(segment)
            position = 0
            if segment.base_offset < start:
                found = segment.find(start)
                if found is None:
                    continue
                position = found[0]
            for pos, header in segment.headers(position):
                if header.producer_id < 0 or header.base_offset < start:
                    continue
                if not header.is_control:
                    state.update(header)
                    continue
                try:
                    marker = read_marker(segment.read_bytes(pos, header.size), 0, header)
                except RecordsError:
                    continue  # an emptied marker (the cleaner's) or an unreadable one: it ends nothing
                completed = state.complete(header.producer_id, header.producer_epoch, marker.coordinator_epoch,
                                           header.base_offset, commit=marker.commit, timestamp=header.max_timestamp)
                if completed is not None and completed.aborted:
                    self._index_abort(segment, completed)

    # -- offsets and sizes -------------------------------------------------------------------------
    @property
    def segments(self) -> list[Segment]:
        """The segments, oldest first (a snapshot: rolls replace the list rather than change it)."""
        return self._segments

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        """A single node's high watermark is its log end."""
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        """Every offset below this is fsynced."""
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended but not yet fsynced (Kafka counts offsets too)."""
        return self._segments[-1].next_offset - self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def update_config(self, config: LogConfig) -> None:
        """New settings apply from the next append (index sizes from the next segment, as in Kafka)."""
        self.config = config
        self._segments[-1].index_interval_bytes = config.index_interval_bytes

    # -- appending ---------------------------------------------------------------------------------
    def append(self, records: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], *, now_ms: int,
               leader_epoch: int = 0) -> AppendResult:
        """Assign offsets from the log end by patching each batch in the caller's buffer, and write it.

        `records` holds whole, validated batches at the positions `batches` names; each header there must
        say what its batch's bytes say (any timestamp stamping done), but for the base offset and the
        leader epoch, which the log writes: the headers are not parsed again. Idempotent producers'
        batches are then checked: a duplicate returns its original offsets and writes nothing; a fenced
        or out-of-sequence batch raises `ProducerStateError` (either way the buffer keeps the offsets it
        was patched with, which nothing reads).
        """
        with self._write_lock:
            return self._append(records, batches, now_ms, leader_epoch)

    def recycle_unflushed(self) -> None:
        """Appends nobody is about to fsync (acks 0 and 1 under the flush policy): past a step, the
        page-cache budget writes them back and counts them (`PageCache.written`), or they would fill
        fresh pages for ever."""
        segment = self._segments[-1]
        self.page_cache.written(segment, segment.size)

    def _append(self, records: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now_ms: int,
                leader_epoch: int) -> AppendResult:
        if self._closed:
            raise LogClosedError(f"{self!r} is closed")
        if not batches:
            raise ValueError("an append needs at least one batch")
        segment = self._segments[-1]
        base_offset = next_offset = segment.next_offset  # a roll starts the new segment right here
        current: list[tuple[int, BatchHeader]] = []
        max_timestamp = NO_TIMESTAMP
        idempotent = False
        for pos, given in batches:
            header = assign_offsets(records, pos, given, next_offset, leader_epoch)
            current.append((pos, header))
            next_offset += header.last_offset_delta + 1
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
            if header.producer_id >= 0:
                idempotent = True
        if idempotent:
            duplicate = self.producer_state.check(current)
            if duplicate is not None:
                return AppendResult(duplicate.first_offset, duplicate.last_offset, self.log_start_offset, True)
        self._write(records, current, max_timestamp, next_offset - 1, now_ms)
        if idempotent:
            update = self.producer_state.update
            for _, header in current:
                if header.producer_id >= 0:
                    update(header)
        return AppendResult(base_offset, next_offset - 1, self.log_start_offset)

    def _write(self, records: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]],
               max_timestamp: int, last_offset: int, now_ms: int) -> Segment:
        """Roll if the rules say so, then write; returns the segment written to."""
        segment = self._segments[-1]
        config = self.config
        if segment.should_roll(append_size=len(records), append_max_timestamp=max_timestamp,
                               append_last_offset=last_offset, segment_bytes=config.segment_bytes,
                               segment_ms=config.segment_ms, now_ms=now_ms):
            segment = self.roll(now_ms)
        segment.append(records, batches)
        return segment

    # -- moving between log dirs (`storage.log_mover`) ----------------------------------------------
    def append_copied(self, data: bytes, batches: list[tuple[int, BatchHeader]], *, now_ms: int) -> None:
        """A move's copy of another log's batches, offsets kept (Kafka's `appendAsFollower`): the producer
        state and the `.txnindex` follow the batches and markers as they are met."""
        with self._write_lock:
            if self._closed:
                raise LogClosedError(f"{self!r} is closed")
            last = batches[-1][1]
            segment = self._write(data, batches, max(h.max_timestamp for _, h in batches),
                                  last.base_offset + last.last_offset_delta, now_ms)
            state = self.producer_state
            for pos, header in batches:
                if header.producer_id < 0:
                    continue
                if not header.is_control:
                    state.update(header)
                    continue
                with contextlib.suppress(RecordsError):  # an emptied marker (the cleaner's) ends nothing
                    marker = read_marker(data, pos, header)
                    completed = state.complete(header.producer_id, header.producer_epoch, marker.coordinator_epoch,
                                               header.base_offset, commit=marker.commit, timestamp=header.max_timestamp)
                    if completed is not None and completed.aborted:
                        self._index_abort(segment, completed)

    def restart_at(self, offset: int) -> None:
        """Drop everything and start empty at `offset` (Kafka's `truncateFullyAndStartAt`)."""
        with self._flush_lock:
            self._truncate_fully(offset, self._clock())

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold off appends, flushes, retention, DeleteRecords and the cleaner's swaps: a move's swap."""
        with self._flush_lock, self._write_lock:
            yield

    def close_moved(self) -> None:
        """Inside `paused`, once a copy holds every offset durably in another dir and this log's dir was
        renamed away: closed for good, every offset counted as durable (a waiter for an fsync is answered
        at once), the open files kept for reads already handed out until `release_retired`."""
        self._closed = True
        self._recovery_point = self.log_end_offset
        deadline = self._clock() + self.config.file_delete_delay_ms
        for segment in self._segments:
            segment.closed = True
            self._retired.append((deadline, segment))

    # -- transactions ------------------------------------------------------------------------------
    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, *,
                      now_ms: int, leader_epoch: int = 0) -> AppendResult:
        """Write a COMMIT or ABORT marker for a producer and end its open transaction (Kafka's
        `appendAsLeader` with origin COORDINATOR). An abort is recorded in the `.txnindex` of the
        segment that holds the marker; the last stable offset moves. A marker for a producer with no
        open transaction is written all the same and ends nothing, as in Kafka.

        Raises `ProducerStateError` (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) before
        writing anything. The caller notifies the purgatory and waits for the fsync it needs.
        """
        with self._write_lock:
            return self._append_marker(producer_id, producer_epoch, coordinator_epoch, commit, now_ms, leader_epoch)

    def _append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                       now_ms: int, leader_epoch: int) -> AppendResult:
        if self._closed:
            raise LogClosedError(f"{self!r} is closed")
        state = self.producer_state
        state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        data = build_marker_batch(producer_id=producer_id, producer_epoch=producer_epoch,
                                  coordinator_epoch=coordinator_epoch, commit=commit, timestamp_ms=now_ms)
        offset = self._segments[-1].next_offset
        patch_base_offset(data, 0, offset)
        patch_leader_epoch(data, 0, leader_epoch)
        header = parse_header(data)
        segment = self._write(data, [(0, header)], header.max_timestamp, offset, now_ms)
        completed = state.complete(producer_id, producer_epoch, coordinator_epoch, offset, commit=commit,
                                   timestamp=now_ms)
        if completed is not None and completed.aborted:
            self._index_abort(segment, completed)
        return AppendResult(offset, offset, self.log_start_offset)

    def _index_abort(self, segment: Segment, completed: CompletedTxn) -> None:
        touched, state = self._txn_touched, self.producer_state
        if not touched or touched[-1] is not segment:
            touched.append(segment)
        segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                            state.stable_offset_after(completed)))

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark (never below the log
        start: a DeleteRecords past an open transaction's start moves it too, as in Kafka)."""
        return self.positions()[1]

    def positions(self) -> tuple[int, int, int]:
        """(high watermark, last stable offset, log start): a fetch asks all three of every partition it names."""
        hw, first, start = self._segments[-1].next_offset, self.producer_state.first_unstable_offset, self.log_start_offset
        lso = hw if first is None or first > hw else first
        return hw, lso if lso > start else start, start

    def aborted_txns(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start_offset, upper_bound) (Kafka's
        `collectAbortedTransactions`: from the segment holding `start_offset` on, until an entry's LSO
        shows that no later abort can reach back below the upper bound)."""
        segments = self._segments
        found: list[AbortedTxn] = []
        for segment in segments[max(bisect_right(self._bases, start_offset) - 1, 0):]:
            search = segment.txn_index.collect(start_offset, upper_bound)
            found.extend(search.aborted)
            if search.complete:
                break
        return found

    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of each aborted transaction a fetch of [start_offset, upper_bound)
        must report to a read_committed consumer."""
        return [(txn.producer_id, txn.first_offset) for txn in self.aborted_txns(start_offset, upper_bound)]

    def roll(self, now_ms: int | None = None) -> Segment:
        """Start a new segment at the log end (the active one is kept if it is empty)."""
        active = self._segments[-1]
        if active.size == 0:
            return active
        now = self._clock() if now_ms is None else now_ms
        base = active.next_offset
        active.become_inactive()
        segment = self._new_segment(base, now)
        self.producer_state.remove_expired(now)
        self.producer_state.take_snapshot(base, sync=False)  # before publishing: see `flush`
        with self._segments_lock:
            self._segments = [*self._segments, segment]
            self._bases = [*self._bases, base]
        return segment

    def replace_segments(self, old: list[Segment], swap_in: Callable[[], Segment]) -> bool:
        """The cleaner's swap: put the segment `swap_in()` makes live on disk in place of `old`.

        `old` must still be a run of this log's segments (oldest first) with a segment after it (the
        active one is never replaced); otherwise (the log was closed, deleted or had segments removed
        since the cleaner looked) nothing happens and the answer is False. `swap_in` does the
        crash-safe renames and returns the new, lazily opened segment; it runs under the locks, so no
        roll, flush, truncation or close sees the files half renamed. The old segments' open files are
        kept for `file.delete.delay.ms`, for reads already handed out.
        """
        with self._flush_lock, self._segments_lock:
            segments = self._segments
            if self._closed or not old or old[0] not in segments:
                return False
            first = segments.index(old[0])
            after = first + len(old)
            if segments[first:after] != old or after >= len(segments):
                return False
            new = swap_in()
            new.upper_bound = new.next_offset = segments[after].base_offset
            replaced = [*segments[:first], new, *segments[after:]]
            self._bases = [s.base_offset for s in replaced]
            self._segments = replaced
            deadline = self._clock() + self.config.file_delete_delay_ms
            for segment in old:
                segment.closed = True
                self._retired.append((deadline, segment))
        return True

    # -- retention ---------------------------------------------------------------------------------
    def delete_old_segments(self, now_ms: int | None = None) -> Verdict:
        """Retention (`storage.retention`): drop the oldest segments its rules allow, at once from the
        segment list and, after `file.delete.delay.ms`, from the disk (renamed to `.deleted` until
        then). The log start offset moves up to the first segment kept."""
        now = self._clock() if now_ms is None else now_ms
        config = self.config
        rules = RetentionRules(config.retention_ms, config.retention_bytes,
                               "delete" in config.cleanup_policy.split(","))
        with self._flush_lock, self._segments_lock:
            if self._closed:
                return KEEP
            segments = self._segments
            verdict = deletable_prefix(segments, rules, now_ms=now, log_start_offset=self.log_start_offset,
                                       high_watermark=self.high_watermark)
            if not verdict.count:
                return verdict
            doomed, kept = segments[: verdict.count], segments[verdict.count :]
            self._bases = [s.base_offset for s in kept]
            self._segments = kept
            self.log_start_offset = max(self.log_start_offset, kept[0].base_offset)
            deadline = now + config.file_delete_delay_ms
            for segment in doomed:
                segment.mark_deleted()
                self._retired.append((deadline, segment))
            self.producer_state.delete_snapshots(below=kept[0].base_offset)
        return verdict

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to `offset` (-1: the high watermark); segments wholly
        below it go at the next retention pass. Returns the new log start offset."""
        with self._flush_lock:
            if self._closed:
                raise LogClosedError(f"{self!r} is closed")
            target = self.high_watermark if offset == -1 else offset
            if target < 0 or target > self.high_watermark:
                raise OffsetOutOfRange(offset, self.log_start_offset, self.high_watermark)
            self.log_start_offset = max(self.log_start_offset, target)
            return self.log_start_offset

    # -- reading -----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True, want_upper_bound: bool = False) -> ReadResult:
        """Whole batches from the one holding `offset`: at most `max_bytes` (but at least one batch when
        `min_one_batch`), none reaching `max_offset` (default: the high watermark), one segment only.
        `want_upper_bound` also finds the offset after the region (read_committed's aborted list)."""
        if self._closed:
            raise LogClosedError(f"{self!r} is closed")
        segments = self._segments
        end = segments[-1].next_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRange(offset, self.log_start_offset, end)
        limit = end if max_offset is None or max_offset > end else max_offset
        if offset >= limit or (max_bytes <= 0 and not min_one_batch):
            return NOTHING_TO_READ  # no room left (a full fetch answer): the offset checked, no segment read
        count = len(segments)  # consumers read the active segment: no search for it (asked of every partition)
        i = count - 1 if offset >= segments[-1].base_offset else max(bisect_right(self._bases, offset) - 1, 0)
        while i < count:
            segment, i = segments[i], i + 1
            found = segment.read_region(offset, max_bytes, limit, min_one_batch)
            if found is None:
                continue  # past this segment's last batch (a gap): the next segment has it
            position, length, after = found
            if not length:
                return NOTHING_TO_READ
            upper = -1
            if want_upper_bound:
                upper = after if after >= 0 else segment.offset_at_position(position + length)
                if upper < 0:
                    upper = segments[i].base_offset if i < count else end
            region = FileRegion(segment.file, position, length)
            self.page_cache.reading(segment, region)
            return ReadResult(region, upper)
        return NOTHING_TO_READ

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is at or after `timestamp`."""
        return timestamp_lookup.offset_for_timestamp(self._segments, self.log_start_offset, timestamp)

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(largest timestamp, offset of its first record): ListOffsets -3. (-1, -1) when empty."""
        return timestamp_lookup.max_timestamp_and_offset(self._segments, self.log_start_offset)

    # -- durability --------------------------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> int:
        """fsync everything appended so far (nothing if `up_to` is already durable); returns the new recovery
        point. Any thread, concurrently with appends. Files made since the last dir fsync (a roll's, a first
        `.txnindex`, a rebuilt index) get one before the recovery point passes them (architecture.md §5)."""
        if up_to is not None and up_to <= self._recovery_point:
            return self._recovery_point
        with self._flush_lock:
            if self._closed:
                raise LogClosedError(f"{self!r} is closed")
            with self._write_lock:  # whole appends only: offsets with their `.txnindex` entries and flags
                target = self._segments[-1].next_offset  # before the fsync: never claim more than is synced
                touched, self._txn_touched = self._txn_touched, []
            point = self._recovery_point
            dirty: list[Segment] = []
            for segment in reversed(self._segments):
                if segment.next_offset <= point and (segment.active or segment.indexes_synced):
                    break
                dirty.append(segment)
            dirty += [s for s in dict.fromkeys(touched) if s not in dirty and s in self._segments]
            started = time.perf_counter()
            synced = [(segment, segment.flush()) for segment in dirty]
            new = [segment.base_offset for segment in dirty if segment.base_offset >= point]
            for base in new:  # a roll's snapshot (written before its segment was published), then the names
                self.producer_state.sync_snapshot(base)
            if [segment for segment in dirty if segment.take_new_names()] or new:
                fsync_dir(self.dir)
            if dirty:
                report_flush(time.perf_counter() - started)
            self._recovery_point = max(point, target)
            self.last_flush_ms = self._clock()
            for segment, end in reversed(synced):  # oldest first, as the budget counts them
                self.page_cache.fsynced(segment, end)
            return self._recovery_point

    def take_producer_snapshot(self) -> None:
        """Snapshot the producer state at the log end, durably, even with no producers (it spares the next
        start a replay): at clean shutdown; rolls take their own."""
        state = self.producer_state
        end = self.log_end_offset
        if state.snapshot_path(end).exists():
            state.sync_snapshot(end)  # a roll's, maybe not yet fsynced
        else:
            state.take_snapshot(end, sync=True)

    def truncate_to(self, offset: int) -> None:
        """Remove everything from the batch holding `offset` on; the log end becomes that batch's base
        offset (at a batch boundary, `offset` itself). Below the log start, the log restarts empty."""
        with self._flush_lock:
            if self._closed:
                raise LogClosedError(f"{self!r} is closed")
            if offset >= self.log_end_offset:
                return
            now = self._clock()
            segments = self._segments
            if offset < self.log_start_offset or segments[0].base_offset > offset:
                self._truncate_fully(offset, now)
                return
            kept = [s for s in segments if s.base_offset <= offset]
            self._retire(segments[len(kept) :], now)
            last = kept[-1]
            last.upper_bound = None
            last.truncate_to(offset, now)
            if not last.active:
                last.make_active(self.config.max_index_bytes)
            self._segments, self._bases = kept, [s.base_offset for s in kept]
            self._recovery_point = min(self._recovery_point, self.log_end_offset)
            self._rebuild_producer_state(now)

    def _truncate_fully(self, offset: int, now_ms: int) -> None:
        self._retire(self._segments, now_ms)
        self.producer_state.delete_snapshots(below=2**63 - 1)
        self._segments = [self._new_segment(offset, now_ms)]
        self._bases = [offset]
        self.log_start_offset = offset
        self._recovery_point = min(self._recovery_point, offset)
        self._rebuild_producer_state(now_ms)

    # -- lifetime ----------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def _retire(self, segments: list[Segment], now_ms: int) -> None:
        """Delete segments' files, keeping their open `.log` for `file.delete.delay.ms` (Kafka's delay)
        so a region already handed to the server is still sent from the right file."""
        deadline = now_ms + self.config.file_delete_delay_ms
        for segment in segments:
            segment.delete_files(keep_open=True)
            self._retired.append((deadline, segment))

    def release_retired(self, now_ms: int | None = None) -> bool:
        """Close retired segments whose delay passed (all of them without `now_ms`); True when none
        are left."""
        with self._flush_lock:
            keep = []
            for deadline, segment in self._retired:
                if now_ms is None or deadline <= now_ms:
                    segment.release()
                else:
                    keep.append((deadline, segment))
            self._retired = keep
            self._release_idle_files(now_ms)
            return not keep and not self._idle_files

    def close_idle_files(self, now_ms: int) -> int:
        """Close the files let go of by earlier calls once `file.delete.delay.ms` passed and no `FileRegion`
        holds them (a response not yet sent), then let go of segment files unused since the last call
        (reopened on next use). A file is never closed by the call that let go of it, nor sooner than
        `IDLE_CLOSE_GRACE_MS` after. Returns the files closed."""
        with self._flush_lock:
            if self._closed:
                return 0
            closed = self._release_idle_files(now_ms)
            self._detach_idle_files(now_ms + max(self.config.file_delete_delay_ms, IDLE_CLOSE_GRACE_MS))
            return closed

    def _detach_idle_files(self, deadline: int) -> None:
        """(A function of its own, so no local reference outlives it and spoils `unshared`.)"""
        for segment in self._segments:
            file = segment.detach_if_idle()
            if file is not None:
                self._idle_files.append((deadline, file))

    def _release_idle_files(self, now_ms: int | None) -> int:
        """Close the idle files whose delay passed and that no read holds (all without `now_ms`)."""
        kept = []
        closed = 0
        for entry in self._idle_files:
            if now_ms is None or (entry[0] <= now_ms and unshared(entry[1])):
                with contextlib.suppress(OSError):
                    entry[1].close()
                closed += 1
            else:
                kept.append(entry)
        self._idle_files = kept
        return closed

    def close(self) -> None:
        """Snapshot producer state, trim and fsync the indexes, close the files (data stays as flushed),
        then fsync the dir: whatever a clean stop leaves (new files, removed ones) survives a power cut."""
        with self._flush_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self.take_producer_snapshot()
            finally:
                self._release_idle_files(None)
                _close_all(self._segments, sync=True)
        self.release_retired()
        fsync_dir(self.dir)

    def delete(self) -> None:
        """Remove the partition: rename its dir to Kafka's `<dir>.<uuid>-delete` (atomic; the topic part
        cut short for long names), then remove it. The `.log` files stay open until `release_retired`
        (regions already handed out)."""
        with self._flush_lock:
            if self._closed:
                return
            self._closed = True
            self._retire(self._segments, self._clock())
        doomed = self.dir.with_name(renamed_dir_name(self.dir.name, DELETE_SUFFIX))
        try:
            os.rename(self.dir, doomed)
        except FileNotFoundError:
            return
        shutil.rmtree(doomed, ignore_errors=True)

    def abandon(self) -> None:
        """A failed disk's log at shutdown: let go of every open file, write nothing (no snapshot, no index
        trim); the next startup recovers the dir as after a crash."""
        with self._flush_lock:
            self._closed = True
            for segment in [*self._segments, *(s for _, s in self._retired)]:
                with contextlib.suppress(OSError):
                    segment.release()
            self._retired = []
            self._release_idle_files(None)


def _close_all(segments: list[Segment], *, sync: bool) -> None:
    """Close every segment even if some fail; re-raise the first failure."""
    first: BaseException | None = None
    for segment in segments:
        try:
            segment.close(sync=sync)
        except OSError as exc:
            first = first or exc
    if first is not None:
        raise first
