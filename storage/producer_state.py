"""Producers' state for one partition: each producer id's epoch, its last five batches and its open
transaction.

Kafka 4's rules (`UnifiedLog.analyzeAndValidateProducerState`, `ProducerAppendInfo`), checked before
anything is written:
- a batch whose epoch, first and last sequence equal one of the producer's five cached batches is a
  duplicate: the append answers with the original offsets and writes nothing;
- an epoch below the producer's is fenced: INVALID_PRODUCER_EPOCH (47);
- a new epoch of a known producer must start at sequence 0, and within an epoch each batch's first
  sequence must follow the last one (wrapping from 2**31-1 to 0): else OUT_OF_ORDER_SEQUENCE_NUMBER
  (45). A producer the partition knows nothing about may start anywhere (its state may have gone with
  old data); Kafka 4 no longer answers UNKNOWN_PRODUCER_ID (59) for that, so neither do we.
Several batches in one append are checked against each other as well as against the stored state.

Transactions (Kafka's `ProducerAppendInfo`): a producer's first transactional batch opens its
transaction at that batch's base offset; a data batch that is not transactional while one is open is
INVALID_TXN_STATE (48). A COMMIT or ABORT marker ends it: a marker whose epoch is below the producer's is
INVALID_PRODUCER_EPOCH, one whose coordinator epoch is below the stored one TRANSACTION_COORDINATOR_FENCED
(52); a marker for a producer with no open transaction is still written and completes nothing. The last
stable offset is the first offset of the oldest open transaction. Batches without a sequence (the group
coordinator's transactional offset commits) get the epoch check only, as Kafka's coordinator origin.

State survives restarts through snapshots in Kafka's format (`producer_snapshot`), taken when a
segment rolls and at clean shutdown; loading replays batch headers from the newest snapshot to the end.
A roll's snapshot is written on the event loop without fsync; the log's flush (flusher thread) fsyncs
it with `sync_snapshot` before the recovery point passes it. Pruning never removes the newest snapshot
known durable before a newer one is, so a power cut always leaves a whole one (or none) to start from.
Producers idle longer than Kafka's `producer.id.expiration.ms` default are dropped at load and roll,
unless a transaction of theirs is open.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import BatchHeader
from pybroker.storage.errors import CorruptSnapshotError, ProducerStateError
from pybroker.storage.files import atomic_write
from pybroker.storage.producer_snapshot import (
    SNAPSHOT_SUFFIX,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
)
from pybroker.storage.segment_names import base_offsets

NO_EPOCH = -1
NO_TXN = -1
CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1
PRODUCER_ID_EXPIRATION_MS = 86_400_000
#: snapshots kept on disk (newest first); older ones only shorten a replay after a deep truncation
SNAPSHOTS_KEPT = 3


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerInfo(NamedTuple):
    """One producer as DescribeProducers answers it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: none open


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: the marker's offset is its last offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class ProducerEntry:
    """One producer id: its epoch, the metadata of its last five batches (oldest first), its open
    transaction's first offset (-1: none) and the coordinator epoch of its last marker."""

    __slots__ = ("batches", "coordinator_epoch", "current_txn_first_offset", "epoch", "last_timestamp")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=CACHED_BATCHES)
        self.last_timestamp = -1
        self.coordinator_epoch = -1
        self.current_txn_first_offset = NO_TXN

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the old epoch's batches (their sequences mean nothing to it)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def add(self, epoch: int, batch: BatchMetadata) -> None:
        self.set_epoch(epoch)
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp


def last_sequence(header: BatchHeader) -> int:
    """The sequence of a batch's last record, wrapping past 2**31-1 as Kafka's producers do."""
    if header.base_sequence < 0:
        return -1
    return (header.base_sequence + header.last_offset_delta) % (INT32_MAX + 1)


def _in_sequence(last_seq: int, first_seq: int) -> bool:
    return first_seq == last_seq + 1 or (first_seq == 0 and last_seq == INT32_MAX)


def _out_of_order(message: str) -> ProducerStateError:
    return ProducerStateError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message)


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        #: producer id -> first offset of its open transaction
        self.ongoing: dict[int, int] = {}
        #: offsets of snapshots written without fsync (a roll's), until `sync_snapshot` or pruning
        self._unsynced: set[int] = set()

    # -- the append path ---------------------------------------------------------------------------
    def check(self, batches: list[tuple[int, BatchHeader]]) -> BatchMetadata | None:
        """Validate every producer batch of one append; the original batch if it is a duplicate.

        Raises `ProducerStateError` for a fenced epoch or a sequence gap. Changes nothing.
        """
        working: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) within this append
        txn_open: dict[int, bool] = {}  # producer id -> a transaction is open, within this append
        for _, header in batches:
            producer_id = header.producer_id
            if producer_id < 0:
                continue
            if header.is_control:
                raise ProducerStateError(ErrorCode.INVALID_RECORD, "control batches are written by the broker only")
            entry = self.producers.get(producer_id)
            epoch, first_seq = header.producer_epoch, header.base_sequence
            if entry is not None and epoch == entry.epoch and first_seq >= 0:
                duplicate = entry.find_duplicate(first_seq, last_sequence(header))
                if duplicate is not None:
                    return duplicate
            stored_epoch = entry.epoch if entry is not None else NO_EPOCH
            seen = working.get(producer_id)
            current_epoch = seen[0] if seen is not None else stored_epoch
            if epoch < current_epoch:
                raise ProducerStateError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"Epoch of producer {producer_id} is {epoch}, which is smaller than the last seen epoch "
                    f"{current_epoch}")
            in_txn = txn_open.get(producer_id, entry is not None and entry.current_txn_first_offset != NO_TXN)
            if in_txn and not header.is_transactional:
                raise ProducerStateError(ErrorCode.INVALID_TXN_STATE,
                                         f"Expected transactional write from producer {producer_id}")
            txn_open[producer_id] = in_txn or header.is_transactional
            if first_seq < 0:
                pass  # no sequence (the group coordinator's offset commits): the epoch check only
            elif epoch != current_epoch:
                if first_seq != 0 and current_epoch != NO_EPOCH:
                    raise _out_of_order(f"Invalid sequence number for new epoch of producer {producer_id}: "
                                        f"{epoch} (request epoch), {first_seq} (seq. number), "
                                        f"{current_epoch} (current producer epoch)")
            else:
                if seen is not None:
                    last_seq = seen[1]
                else:
                    last_seq = entry.last_seq if entry is not None else -1
                if stored_epoch != NO_EPOCH and not _in_sequence(last_seq, first_seq):
                    raise _out_of_order(f"Out of order sequence number for producer {producer_id}: {first_seq} "
                                        f"(incoming seq. number), {last_seq} (current end sequence number)")
            working[producer_id] = (epoch, last_sequence(header))
        return None

    def update(self, header: BatchHeader) -> None:
        """Record a written data batch (its header carries the offsets it was given). Also used to replay."""
        producer_id = header.producer_id
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(header.producer_epoch)
        entry.add(header.producer_epoch, BatchMetadata(header.base_sequence, last_sequence(header),
                                                        header.base_offset, header.last_offset,
                                                        header.max_timestamp))
        if header.is_transactional and entry.current_txn_first_offset == NO_TXN:
            entry.current_txn_first_offset = header.base_offset
            self.ongoing[producer_id] = header.base_offset

    # -- transactions ------------------------------------------------------------------------------
    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker from a fenced producer epoch or coordinator (changes nothing)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {producer_id} is {producer_epoch}, which is smaller than the last seen epoch "
                f"{entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producer {producer_id}: {coordinator_epoch} (zombie), "
                f"{entry.coordinator_epoch} (current)")

    def complete(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int, *, commit: bool,
                 timestamp: int) -> CompletedTxn | None:
        """Apply a marker written at `offset` (checked by `check_marker`, or replayed): the transaction it
        ended, or None when the producer had none open."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_epoch)
        entry.set_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        if first == NO_TXN:
            return None
        entry.current_txn_first_offset = NO_TXN
        self.ongoing.pop(producer_id, None)
        return CompletedTxn(producer_id, first, offset, not commit)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none open). Also read by the cleaner's
        thread: `min` over the values runs in C, so it sees the dict whole (and its default covers a dict
        emptied between the check and the `min`). Every fetch asks this for every partition it names."""
        ongoing = self.ongoing
        return min(ongoing.values(), default=None) if ongoing else None

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """Kafka's LSO recorded with a completed transaction: the oldest other open one's first offset,
        else one past the marker."""
        others = [first for pid, first in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def describe(self) -> list[ProducerInfo]:
        """Every producer the partition tracks, for DescribeProducers."""
        return [ProducerInfo(pid, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                             e.current_txn_first_offset) for pid, e in list(self.producers.items())]

    def remove_expired(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        expired = [pid for pid, e in self.producers.items()
                   if now_ms - e.last_timestamp >= expiration_ms and e.current_txn_first_offset == NO_TXN]
        for producer_id in expired:
            del self.producers[producer_id]

    # -- snapshots ---------------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        return base_offsets(os.listdir(self.directory), SNAPSHOT_SUFFIX)

    def _entries(self) -> Iterator[SnapshotEntry]:
        for producer_id, entry in self.producers.items():
            txn = entry.current_txn_first_offset
            if not entry.batches:
                yield SnapshotEntry(producer_id, entry.epoch, -1, -1, 0, entry.last_timestamp,
                                    entry.coordinator_epoch, txn)
            for batch in entry.batches:
                yield SnapshotEntry(producer_id, entry.epoch, batch.last_seq, batch.last_offset,
                                    batch.last_offset - batch.first_offset, batch.timestamp,
                                    entry.coordinator_epoch, txn)

    def take_snapshot(self, offset: int, *, sync: bool) -> None:
        """Write the state as of `offset` (every batch below it applied) and prune old snapshots.

        Without `sync` (a roll, on the event loop: no fsync on the produce path) the file is only written;
        `sync_snapshot` makes it durable later, from the log's flush, before the recovery point passes it.
        Pruning never removes the newest snapshot known durable while a newer one may not be: a power cut
        in between must still find one whole snapshot to start from.
        """
        atomic_write(self.snapshot_path(offset), encode_snapshot(self._entries()), sync=sync)
        (self._unsynced.discard if sync else self._unsynced.add)(offset)
        offsets = self.snapshot_offsets()
        durable = [o for o in offsets if o not in self._unsynced]
        for old in offsets[:-SNAPSHOTS_KEPT]:
            if not durable or old != durable[-1]:
                self.snapshot_path(old).unlink(missing_ok=True)
                self._unsynced.discard(old)

    def sync_snapshot(self, offset: int) -> None:
        """fsync the snapshot at `offset` if one was written without (the caller fsyncs the dir after).

        Called from the log's flush, on the flusher thread, for the segments a roll made since the last
        flush; a snapshot pruned meanwhile is simply gone."""
        if offset not in self._unsynced:
            return
        try:
            fd = os.open(self.snapshot_path(offset), os.O_RDONLY)
        except FileNotFoundError:
            self._unsynced.discard(offset)
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unsynced.discard(offset)

    def snapshot_into(self, directory: Path, offset: int) -> None:
        """Write the state as of `offset` into another log's dir (a move hands its producers over)."""
        atomic_write(directory / f"{offset:020d}{SNAPSHOT_SUFFIX}", encode_snapshot(self._entries()), sync=True)

    def delete_snapshots(self, *, above: int | None = None, below: int | None = None) -> None:
        """Remove the snapshots for offsets above `above` or below `below`."""
        for offset in self.snapshot_offsets():
            if (above is not None and offset > above) or (below is not None and offset < below):
                self.snapshot_path(offset).unlink(missing_ok=True)

    def load(self, log_start: int, log_end: int, now_ms: int) -> int:
        """Load the newest usable snapshot within [log_start, log_end]; return the offset from which
        the log's batches must be replayed (log_start when there is none)."""
        self.producers = {}
        self.ongoing = {}
        self.delete_snapshots(above=log_end, below=log_start)
        for offset in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(offset)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (OSError, CorruptSnapshotError):
                path.unlink(missing_ok=True)
                continue
            self._restore(entries)
            self.remove_expired(now_ms)
            return offset
        return log_start

    def _restore(self, entries: list[SnapshotEntry]) -> None:
        for row in entries:
            entry = self.producers.get(row.producer_id)
            if entry is None or entry.epoch != row.epoch:
                entry = self.producers[row.producer_id] = ProducerEntry(row.epoch)
            if row.last_offset >= 0:
                first_seq = (row.last_sequence - row.offset_delta) % (INT32_MAX + 1) if row.last_sequence >= 0 \
                    else -1
                entry.batches.append(BatchMetadata(first_seq, row.last_sequence, row.last_offset - row.offset_delta,
                                                   row.last_offset, row.timestamp))
            entry.last_timestamp = row.timestamp
            entry.coordinator_epoch = row.coordinator_epoch
            entry.current_txn_first_offset = row.current_txn_first_offset
            if row.current_txn_first_offset >= 0:
                self.ongoing[row.producer_id] = row.current_txn_first_offset
            else:
                self.ongoing.pop(row.producer_id, None)
