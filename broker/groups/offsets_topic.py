"""`__consumer_offsets` on disk: created on first use, written durably, and replayed at startup.

The coordinator's `GroupLog`: each write becomes one record batch appended to the group's partition
through the partition layer, and its completion callback runs only after the flusher has fsynced that
batch (the same delayed append as an acks=all produce), so a commit is never acknowledged before it would survive a crash. A
TxnOffsetCommit's batch is transactional, under the producer's id and epoch, as Kafka's coordinator
writes it; the transaction's commit or abort marker follows it in the same partition.

Replay reads a partition from its start to its end and keeps, per key, the last record, as compaction
would. Offsets in a transactional batch stay pending under their producer id until that producer's
marker: a commit marker makes them committed where they were written after the committed offset (Kafka's
rule), an abort marker drops them, and a transaction with no marker yet stays pending (the transaction
coordinator completes it after the restart by writing the marker).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pybroker.broker.coordinator.internal_topic import InternalTopic, batches_of
from pybroker.broker.groups.consumer_records import ReplayedConsumerGroup
from pybroker.broker.groups.group import CommittedOffset
from pybroker.broker.groups.group_log import NOT_WRITTEN, Done, Producer, Records
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.share.share_group_log import ReplayedShareGroup
from pybroker.broker.streams_groups.records import ReplayedStreamsGroup
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.coordinator_records import GroupMetadataValue, OffsetCommitValue
from pybroker.protocol.offsets_topic_records import ConsumerRecord, GroupRecord, OffsetRecord, decode_record
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.records.batch import BatchHeader, RecordsError
from pybroker.protocol.records.control import read_marker
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.protocol.share_offsets_records import ShareRecord
from pybroker.protocol.streams_offsets_records import StreamsRecord
from pybroker.storage.errors import StorageError
from pybroker.storage.producer_state import INT32_MAX

if TYPE_CHECKING:
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
    from pybroker.storage.log import Log

log = get_logger("pybroker.groups")

OFFSETS_TOPIC = "__consumer_offsets"


Key = tuple[str, int]


@dataclass(slots=True)
class ReplayedPartition:
    """The last word on every key of one partition: group metadata (None: deleted), committed offsets,
    and the offsets of transactions with no marker yet (group -> producer id -> offsets)."""

    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    offsets: dict[str, dict[Key, CommittedOffset]] = field(default_factory=dict)
    pending: dict[str, dict[int, dict[Key, CommittedOffset]]] = field(default_factory=dict)
    #: consumer-protocol groups (KIP-848): the last value of each of their keys
    consumer: dict[str, ReplayedConsumerGroup] = field(default_factory=dict)
    #: streams groups (KIP-1071): likewise
    streams: dict[str, ReplayedStreamsGroup] = field(default_factory=dict)
    #: share groups (KIP-932): likewise, handed to the share coordinator (`broker/share/service.py`)
    share: dict[str, ReplayedShareGroup] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0
    markers: int = 0

    def apply(self, record: OffsetRecord | GroupRecord | ConsumerRecord | StreamsRecord | ShareRecord,
              record_offset: int = -1, producer_id: int | None = None) -> None:
        """One record, in log order; `producer_id` when it sits in a transactional batch."""
        if isinstance(record, ShareRecord):
            self.share.setdefault(record.group, ReplayedShareGroup()).apply(record)
            return
        if isinstance(record, StreamsRecord):
            self.streams.setdefault(record.group, ReplayedStreamsGroup()).apply(record)
            return
        if isinstance(record, ConsumerRecord):
            self.consumer.setdefault(record.group, ReplayedConsumerGroup()).apply(record)
            return
        if isinstance(record, GroupRecord):
            self.groups[record.group] = record.value
            return
        key = (record.topic, record.partition)
        if record.value is None:  # a tombstone ends the committed offset and every pending one
            self.offsets.get(record.group, {}).pop(key, None)
            for pending in self.pending.get(record.group, {}).values():
                pending.pop(key, None)
            return
        offset = committed_offset(record.value, record_offset)
        if producer_id is None:
            self.offsets.setdefault(record.group, {})[key] = offset
        else:
            self.pending.setdefault(record.group, {}).setdefault(producer_id, {})[key] = offset

    def complete(self, producer_id: int, commit: bool) -> None:
        """A marker: the producer's pending offsets in every group become committed, or are dropped."""
        self.markers += 1
        for group, by_producer in self.pending.items():
            pending = by_producer.pop(producer_id, None)
            if not pending or not commit:
                continue
            committed = self.offsets.setdefault(group, {})
            for key, offset in pending.items():
                current = committed.get(key)
                if current is None or offset.record_offset > current.record_offset:
                    committed[key] = offset


def committed_offset(value: OffsetCommitValue, record_offset: int) -> CommittedOffset:
    return CommittedOffset(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                           value.expire_timestamp, record_offset)


def _replay_batch(result: ReplayedPartition, data: bytes, pos: int, header: BatchHeader, start: int) -> None:
    if header.is_control:
        if header.is_transactional and header.producer_id >= 0 and header.base_offset >= start:
            try:
                marker = read_marker(data, pos, header)
            except RecordsError:
                result.skipped += 1
                return
            result.complete(header.producer_id, marker.commit)
        return
    producer_id = header.producer_id if header.is_transactional else None
    for record in decode_records(data, pos, header):
        record_offset = header.base_offset + record.offset_delta
        if record_offset < start:
            continue
        try:
            decoded = decode_record(record.key, record.value)
        except DecodeError:
            result.skipped += 1
            continue
        if decoded is None:
            result.skipped += 1
            continue
        result.records += 1
        result.apply(decoded, record_offset, producer_id)


def replay(partition_log: Log) -> ReplayedPartition:
    """Read one offsets-topic partition from its start to its high watermark (blocking: run in a thread)."""
    result = ReplayedPartition()
    for data, pos, header, read_from in batches_of(partition_log):
        _replay_batch(result, data, pos, header, read_from)
    return result


class OffsetsTopic(InternalTopic):
    """The coordinator's writer; creates the topic with Kafka's settings the first time it is needed."""

    def __init__(self, partitions: CoordinatorPartitions) -> None:
        super().__init__(partitions, OFFSETS_TOPIC, partitions_key="offsets.topic.num.partitions",
                         segment_bytes_key="offsets.topic.segment.bytes", compression="producer")

    def append(self, partition: int, records: Records, now_ms: int, done: Done, *,
               producer: Producer | None = None) -> int:
        try:
            self.ensure()
        except (OSError, StorageError) as exc:  # a failing disk, or the partition cap reached
            log.error("cannot create internal topic", topic=OFFSETS_TOPIC, error=str(exc))
            asyncio.get_running_loop().call_soon(done, ErrorCode.KAFKA_STORAGE_ERROR)
            return NOT_WRITTEN
        return self.write_batch(partition, lambda target: build_batch(
            [Record(i, 0, key, value) for i, (key, value) in enumerate(records)],
            base_timestamp=now_ms, **_transactional(target, producer)), now_ms, lambda code, _found: done(code))


def _transactional(target: Log, producer: Producer | None) -> dict[str, Any]:
    """The batch fields of a TxnOffsetCommit's write: transactional, the producer's id and epoch, and
    the sequence that follows what this partition last saw of that producer. (Kafka's coordinator
    appends with an origin that skips sequence checks; following the stored sequence passes them.)"""
    if producer is None:
        return {}
    producer_id, epoch = producer
    entry = target.producer_state.producers.get(producer_id)
    sequence = 0
    if entry is not None and entry.epoch == epoch and entry.last_seq >= 0:
        sequence = (entry.last_seq + 1) % (INT32_MAX + 1)
    return {"producer_id": producer_id, "producer_epoch": epoch, "base_sequence": sequence,
            "is_transactional": True}
