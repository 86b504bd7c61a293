"""`__consumer_offsets` on disk: created on first use, written durably, and replayed at startup.

The coordinator's `GroupLog`: each write becomes one record batch appended to the group's partition,
and its completion callback runs only after the flusher has fsynced that batch (the same group commit as
an acks=all produce), so a commit is never acknowledged before it would survive a crash. Replay reads a
partition from its start to its end and keeps, per key, the last record, as compaction would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pybroker.broker.groups.group_log import Done, Records
from pybroker.broker.logs import get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.coordinator_records import GroupMetadataValue, OffsetCommitValue
from pybroker.protocol.offsets_topic_records import GroupRecord, OffsetRecord, decode_record
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.records.batch import RecordsError, iter_batches, parse_header
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.errors import StorageError, TopicExistsError

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState
    from pybroker.storage.log import Log

log = get_logger("pybroker.groups")

OFFSETS_TOPIC = "__consumer_offsets"
READ_CHUNK_BYTES = 1 << 20


@dataclass(slots=True)
class ReplayedPartition:
    """The last word on every key of one partition: group metadata (None: deleted) and offsets."""

    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0

    def apply(self, record: OffsetRecord | GroupRecord) -> None:
        if isinstance(record, GroupRecord):
            self.groups[record.group] = record.value
            return
        group_offsets = self.offsets.setdefault(record.group, {})
        key = (record.topic, record.partition)
        if record.value is None:
            group_offsets.pop(key, None)
        else:
            group_offsets[key] = record.value


def replay(partition_log: Log) -> ReplayedPartition:
    """Read one offsets-topic partition from its start to its high watermark (blocking: run in a thread)."""
    result = ReplayedPartition()
    offset = partition_log.log_start_offset
    end = partition_log.high_watermark
    while offset < end:
        region = partition_log.read(offset, READ_CHUNK_BYTES, max_offset=end).region
        if region is None:
            break
        data = region.read_bytes()
        advanced = offset
        for pos, header in iter_batches(data):
            advanced = header.next_offset
            if header.is_control:
                continue
            for record in decode_records(data, pos, header):
                if header.base_offset + record.offset_delta < offset:
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
                result.apply(decoded)
        if advanced <= offset:
            break
        offset = advanced
    return result


class OffsetsTopic:
    """The coordinator's writer; creates the topic with Kafka's settings the first time it is needed."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.num_partitions = int(state.config.get("offsets.topic.num.partitions"))
        self.on_created: Callable[[], None] | None = None

    def exists(self) -> bool:
        return self.state.logs.topics().get(OFFSETS_TOPIC) is not None

    def ensure(self) -> None:
        if self.exists():
            return
        configs = {"cleanup.policy": "compact",
                   "segment.bytes": str(self.state.config.get("offsets.topic.segment.bytes")),
                   "compression.type": "producer"}
        try:
            self.state.logs.create_topic(OFFSETS_TOPIC, self.num_partitions, configs)
        except TopicExistsError:
            return
        log.info("created internal topic", topic=OFFSETS_TOPIC, partitions=self.num_partitions)

    def append(self, partition: int, records: Records, now_ms: int, done: Done) -> None:
        loop = asyncio.get_running_loop()
        try:
            self.ensure()
        except (OSError, StorageError) as exc:  # a failing disk, or the partition cap reached
            log.error("cannot create internal topic", topic=OFFSETS_TOPIC, error=str(exc))
            loop.call_soon(done, ErrorCode.KAFKA_STORAGE_ERROR)
            return
        target = self.state.logs.get_log(OFFSETS_TOPIC, partition)
        if target is not None and not self.state.logs.is_online(target):
            loop.call_soon(done, ErrorCode.KAFKA_STORAGE_ERROR)
            return
        if target is None:
            loop.call_soon(done, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return
        batch = bytearray(build_batch([Record(i, 0, key, value) for i, (key, value) in enumerate(records)],
                                      base_timestamp=now_ms))
        try:
            result = target.append(batch, [(0, parse_header(batch, 0))], now_ms=now_ms)
        except (OSError, RecordsError) as exc:
            log.error("offsets topic append failed", partition=partition, error=str(exc))
            if isinstance(exc, OSError):
                self.state.logs.report_io_error(target, exc)
            loop.call_soon(done, ErrorCode.KAFKA_STORAGE_ERROR)
            return
        self.state.purgatory.notify((OFFSETS_TOPIC, partition))
        flushed = self.state.logs.flusher_for(target).request(target, result.last_offset + 1)
        asyncio.wrap_future(flushed).add_done_callback(lambda f: done(_flush_code(f, partition)))


def _flush_code(future: asyncio.Future[int] | Future[int], partition: int) -> ErrorCode:
    if future.cancelled():
        return ErrorCode.KAFKA_STORAGE_ERROR
    exc = future.exception()
    if exc is not None:
        log.error("offsets topic flush failed", partition=partition, error=repr(exc))
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE
