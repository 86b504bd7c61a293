"""`__share_group_state` on disk: the share-partitions' durable state, written before answering, replayed at start.

KIP-932's share coordinator keeps, per (group, topic id, partition), the start offset and the in-flight
state batches, as ShareSnapshot and ShareUpdate records (`pybroker.protocol.share_state_records`). We
write a ShareSnapshot of the whole share-partition each time it changes: at most
`group.share.partition.max.record.locks` records in flight, so a snapshot stays small, and compaction
keeps only the newest per key. Replay reads both record types, as Kafka's coordinator writes updates
between snapshots: a snapshot replaces what came before, an update lays its batches over it.

A key lives in partition `abs(hash("group:topicId:partition")) % partitions` with Java's string hash
and Kafka's text form of the topic id, as Kafka's share coordinator places it, so that a data dir taken
over from Kafka finds each state where Kafka wrote it.

Threads: `write` on the event loop; `replay` blocks and runs in a thread (the coordinator runtime's loading).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from pybroker.broker.coordinator.internal_topic import InternalTopic, batches_of
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.share.share_partition import SharePartition, StateBatch
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.share_state_records import (
    ShareSnapshotValue,
    SnapshotStateBatch,
    UpdateStateBatch,
)
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.protocol.share_state_records import (
    SNAPSHOT_TYPE,
    decode_share_state_record,
    encode_snapshot_key,
    encode_snapshot_value,
)
from pybroker.storage.errors import StorageError
from pybroker.storage.topic_store import kafka_uuid

if TYPE_CHECKING:
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
    from pybroker.storage.log import Log

log = get_logger("pybroker.share")

SHARE_STATE_TOPIC = "__share_group_state"

#: (group id, topic id, partition)
ShareKey = tuple[str, uuid.UUID, int]


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _utf16_units(text: str) -> Iterable[int]:
    data = text.encode("utf-16-be")
    return (int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))


def partition_for(key: ShareKey, num_partitions: int) -> int:
    group_id, topic_id, partition = key
    h = java_string_hash(f"{group_id}:{kafka_uuid(topic_id)}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions  # Kafka's Utils.abs


@dataclass(slots=True)
class DurableState:
    """One share-partition's state as read back: its start offset and state batches, oldest first."""

    start_offset: int
    batches: list[StateBatch] = field(default_factory=list)
    snapshot_epoch: int = 0


@dataclass(slots=True)
class ReplayedShares:
    states: dict[ShareKey, DurableState | None] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0


def _batches(rows: Iterable[SnapshotStateBatch | UpdateStateBatch]) -> list[StateBatch]:
    return [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in rows]


def replay(partition_log: Log) -> ReplayedShares:
    """Read one partition of `__share_group_state` from its start to its high watermark (blocking)."""
    result = ReplayedShares()
    for data, pos, header, read_from in batches_of(partition_log):
        if header.is_control:
            continue
        for record in decode_records(data, pos, header):
            if header.base_offset + record.offset_delta < read_from or record.key is None:
                continue
            try:
                decoded = decode_share_state_record(bytes(record.key),
                                                    None if record.value is None else bytes(record.value))
            except (DecodeError, ValueError):
                result.skipped += 1
                continue
            if decoded is None:
                result.skipped += 1
                continue
            result.records += 1
            key = (decoded.group_id, decoded.topic_id, decoded.partition)
            value = decoded.value
            if value is None:
                result.states[key] = None
            elif decoded.record_type == SNAPSHOT_TYPE:
                result.states[key] = DurableState(value.start_offset, _batches(value.state_batches),
                                                  value.snapshot_epoch)
            else:
                known = result.states.get(key)
                if known is None:  # an update without its snapshot: Kafka skips it too
                    result.skipped += 1
                    continue
                if value.start_offset >= 0:
                    known.start_offset = value.start_offset
                known.batches.extend(_batches(value.state_batches))
    return result


def _built(records: list[Record], now: int, _log: object) -> bytes:
    return build_batch(records, base_timestamp=now)


class ShareStateTopic(InternalTopic):
    """The share coordinator's writer; creates the topic with Kafka's settings the first time it is needed."""

    def __init__(self, partitions: CoordinatorPartitions) -> None:
        super().__init__(partitions, SHARE_STATE_TOPIC, partitions_key="share.coordinator.state.topic.num.partitions",
                         segment_bytes_key="share.coordinator.state.topic.segment.bytes", compression="uncompressed")

    async def tombstone(self, keys: list[ShareKey]) -> ErrorCode:
        """Forget share-partitions (a deleted group): a null-valued snapshot key each, fsynced."""
        if not keys or not self.exists():
            return ErrorCode.NONE
        now = self.partitions.clock_ms()
        by_partition: dict[int, list[Record]] = {}
        for key in keys:
            rows = by_partition.setdefault(partition_for(key, self.num_partitions), [])
            rows.append(Record(len(rows), 0, encode_snapshot_key(*key), None))
        return await self._append(by_partition, now)

    async def write(self, snapshots: dict[ShareKey, tuple[SharePartition, int]]) -> ErrorCode:
        """Write a snapshot of each share-partition (with its snapshot epoch), one batch per partition of
        the topic; returns once all are fsynced (NONE) or the first failure."""
        if not snapshots:
            return ErrorCode.NONE
        if not self.exists():
            try:
                await self.ensure_off_loop()
            except (OSError, StorageError) as exc:
                log.error("cannot create internal topic", topic=SHARE_STATE_TOPIC, error=str(exc))
                return ErrorCode.KAFKA_STORAGE_ERROR
        now = self.partitions.clock_ms()
        by_partition: dict[int, list[Record]] = {}
        for key, (share, epoch) in snapshots.items():
            rows = by_partition.setdefault(partition_for(key, self.num_partitions), [])
            value = ShareSnapshotValue(
                snapshot_epoch=epoch, state_epoch=0, leader_epoch=0, start_offset=share.start_offset,
                delivery_complete_count=share.delivery_complete_count(), create_timestamp=now,
                write_timestamp=now, state_batches=[
                    SnapshotStateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                       delivery_state=b.state, delivery_count=b.delivery_count)
                    for b in share.state_batches()])
            rows.append(Record(len(rows), 0, encode_snapshot_key(*key), encode_snapshot_value(value)))
        return await self._append(by_partition, now)

    async def _append(self, by_partition: dict[int, list[Record]], now: int) -> ErrorCode:
        """One batch per partition of the topic; NONE once all are fsynced, else the first failure."""
        loop = asyncio.get_running_loop()
        waits: list[asyncio.Future[ErrorCode]] = []
        for partition, records in by_partition.items():
            written: asyncio.Future[ErrorCode] = loop.create_future()

            def done(code: ErrorCode, found: bool, written: asyncio.Future[ErrorCode] = written) -> None:
                if not written.done():
                    written.set_result(code if not found or code is ErrorCode.NONE
                                       else ErrorCode.KAFKA_STORAGE_ERROR)

            self.write_batch(partition, partial(_built, records, now), now, done)
            waits.append(written)
        for code in await asyncio.gather(*waits):
            if code is not ErrorCode.NONE:
                return code
        return ErrorCode.NONE
