"""What survives of one record batch when the cleaner recopies it (Kafka's cleaner record filter).

A record survives when any of these holds:
- its offset is past the part of the log the offset map covers (`latest_offset`): this pass did not
  deduplicate it, a later pass will;
- it is the latest record of its key (its offset is at or after the map's offset for the key), and it
  has a value, or it is a tombstone (null value) whose batch's delete horizon has not passed.
A record without a key cannot be deduplicated and is dropped (produce refuses them on compacted topics,
so only a topic compacted after the fact holds any).

Transactions (the caller decides with `transactions.CleanedTransactions`): every record of an aborted
transaction's batch goes; a marker that may go is first stamped with a delete horizon (now +
delete.retention.ms) and removed by the first clean after it, as Kafka does; other markers stay whole.

A batch whose records cannot be decoded or decompressed (a lying record count, a field overrunning
its record, a payload that is not what its codec says: a delete-policy topic may hold such batches
from before produce validated records, and then be switched to compact) is kept whole, byte for
byte: the cleaner cannot tell which of its records are stale, so it drops none of them and the rest
of the log is compacted as usual. Kafka's cleaner gives up on the whole partition instead; one bad
batch must not stop compaction for good.

A batch keeps its base offset and its last offset whatever it loses, as Kafka does, so the producer's
last sequence number and the consumer's next fetch offset survive compaction. A batch that loses every
record disappears, unless it is the last batch of a producer the log still tracks: that one stays as an
empty batch (header only) so idempotent producer state rebuilds the same way after a restart.

Tombstones are kept for `delete.retention.ms` after they reach the clean section: the first clean that
keeps a tombstone stamps its batch with a delete horizon (now + delete.retention.ms, held in the base
timestamp with attribute bit 6, record timestamps rebased so they do not change); a later clean drops
the tombstone once the horizon has passed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.protocol.records.batch import LOG_APPEND_TIME, BatchHeader, RecordsError
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.cleaner.offset_map import OffsetMap

NO_HORIZON = -1


@dataclass(slots=True)
class FilterStats:
    """Counts over every batch filtered in one clean."""

    records_read: int = 0
    records_kept: int = 0
    keyless_dropped: int = 0
    tombstones_dropped: int = 0
    #: batches kept whole because their records could not be decoded
    malformed_kept: int = 0
    #: records of aborted transactions removed, and transaction markers removed
    aborted_dropped: int = 0
    markers_dropped: int = 0
    #: the earliest delete horizon of a tombstone or marker still kept (-1: none), so the manager knows when to
    #: come back and drop it even if nothing else becomes dirty
    earliest_horizon_ms: int = NO_HORIZON

    def note_horizon(self, horizon_ms: int) -> None:
        if self.earliest_horizon_ms == NO_HORIZON or horizon_ms < self.earliest_horizon_ms:
            self.earliest_horizon_ms = horizon_ms


def filter_batch(raw: bytes, header: BatchHeader, offset_map: OffsetMap, *, latest_offset: int, now_ms: int,
                 delete_retention_ms: int, retain_empty: bool, stats: FilterStats,
                 discardable: bool = False) -> bytes | None:
    """The bytes to write for the batch `raw` (itself when nothing changes), or None to drop it.

    `discardable`: the batch is aborted data, or a marker that may go. A batch whose records cannot be
    decoded is returned as it is (and counted in `stats`).
    """
    if header.is_control:
        return _filter_marker(raw, header, now_ms=now_ms, delete_retention_ms=delete_retention_ms,
                              retain_empty=retain_empty, discardable=discardable, stats=stats)
    if discardable:
        stats.aborted_dropped += header.records_count
        return _rebuild(header, [], NO_HORIZON) if retain_empty else None
    try:
        records = decode_records(raw, 0, header)
    except RecordsError:
        stats.malformed_kept += 1
        return raw
    stats.records_read += len(records)
    horizon = header.base_timestamp if header.has_delete_horizon else NO_HORIZON
    horizon_passed = horizon != NO_HORIZON and now_ms >= horizon
    base = header.base_offset
    kept: list[Record] = []
    has_tombstone = False
    for record in records:
        offset = base + record.offset_delta
        if offset > latest_offset:
            kept.append(record)
            has_tombstone = has_tombstone or record.value is None
            continue
        if record.key is None:
            stats.keyless_dropped += 1
            continue
        if offset < offset_map.get(record.key):
            continue
        if record.value is None:
            if horizon_passed:
                stats.tombstones_dropped += 1
                continue
            has_tombstone = True
        kept.append(record)
    stats.records_kept += len(kept)
    # tombstones entering the clean section get their horizon now (the whole batch must be mapped)
    stamp = has_tombstone and horizon == NO_HORIZON and header.last_offset <= latest_offset
    if stamp:
        horizon = now_ms + delete_retention_ms
    if has_tombstone and horizon != NO_HORIZON:
        stats.note_horizon(horizon)
    if len(kept) == len(records) and not stamp:
        return raw
    if not kept and not retain_empty:
        return None
    return _rebuild(header, kept, horizon)


def _filter_marker(raw: bytes, header: BatchHeader, *, now_ms: int, delete_retention_ms: int, retain_empty: bool,
                   discardable: bool, stats: FilterStats) -> bytes | None:
    if not discardable:
        return raw
    if not header.has_delete_horizon:  # it may go from now on: keep it delete.retention.ms longer
        try:
            records = decode_records(raw, 0, header)
        except RecordsError:
            stats.malformed_kept += 1
            return raw
        horizon = now_ms + delete_retention_ms
        stats.note_horizon(horizon)
        return _rebuild(header, records, horizon)
    horizon = header.base_timestamp
    if now_ms < horizon:
        stats.note_horizon(horizon)
        return raw
    stats.markers_dropped += 1
    return _rebuild(header, [], horizon) if retain_empty and header.records_count else (raw if retain_empty else None)


def _rebuild(header: BatchHeader, kept: list[Record], horizon: int) -> bytes:
    """A batch of the kept records with the original's offsets, producer fields, codec and epoch."""
    base_timestamp = horizon if horizon != NO_HORIZON else header.base_timestamp
    shift = header.base_timestamp - base_timestamp  # record timestamps stay what they were
    if shift:
        kept = [Record(r.offset_delta, r.timestamp_delta + shift, r.key, r.value, r.headers, r.attributes)
                for r in kept]
    if header.timestamp_type == LOG_APPEND_TIME or not kept:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = base_timestamp + max(r.timestamp_delta for r in kept)
    return build_batch(
        kept,
        base_offset=header.base_offset,
        compression=header.compression,
        timestamp_type=header.timestamp_type,
        base_timestamp=base_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch,
        has_delete_horizon=horizon != NO_HORIZON,
        last_offset_delta=header.last_offset_delta,
        max_timestamp=max_timestamp,
    )
