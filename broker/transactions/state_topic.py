"""`__transaction_state` on disk: created on first use, written durably, and replayed at startup.

The coordinator's `TxnLog`: each state change becomes one record (Kafka's TransactionLogKey /
TransactionLogValue, `pybroker.protocol.transaction_log_records`) appended to the transactional id's
partition through the partition layer; `write` returns only after the flusher has fsynced it (the same
delayed append as an acks=all produce), so no answer ever depends on a state that a crash could lose. Replay reads a partition from
its start to its end and keeps, per transactional id, the last record, as compaction would.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pybroker.broker.coordinator.internal_topic import InternalTopic, batches_of
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.transactions.metadata import TxnMetadata
from pybroker.broker.transactions.state_machine import TxnState
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.protocol.transaction_log_records import (
    TransactionLogValue,
    TransactionStatus,
    decode_transaction_record,
    encode_transaction_key,
    encode_transaction_value,
    partitions_of,
    transaction_log_value,
)
from pybroker.storage.errors import StorageError

if TYPE_CHECKING:
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
    from pybroker.storage.log import Log

log = get_logger("pybroker.transactions")

TRANSACTION_STATE_TOPIC = "__transaction_state"


def to_value(meta: TxnMetadata) -> TransactionLogValue:
    return transaction_log_value(
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
        transaction_timeout_ms=meta.timeout_ms, status=TransactionStatus(meta.state.code),
        partitions=sorted(meta.partitions) if meta.state is not TxnState.EMPTY else (),
        last_update_timestamp_ms=meta.last_update_ms, start_timestamp_ms=meta.start_ms,
        previous_producer_id=meta.prev_producer_id, next_producer_id=meta.next_producer_id,
        client_transaction_version=meta.client_version)


def from_value(transactional_id: str, value: TransactionLogValue) -> TxnMetadata:
    return TxnMetadata(
        transactional_id=transactional_id, producer_id=value.producer_id, producer_epoch=value.producer_epoch,
        timeout_ms=value.transaction_timeout_ms, state=TxnState.from_code(value.transaction_status),
        last_update_ms=value.transaction_last_update_timestamp_ms,
        partitions=frozenset(partitions_of(value)), start_ms=value.transaction_start_timestamp_ms,
        prev_producer_id=value.previous_producer_id, next_producer_id=value.next_producer_id,
        client_version=value.client_transaction_version)


def encode(transactional_id: str, meta: TxnMetadata | None) -> tuple[bytes, bytes | None]:
    return (encode_transaction_key(transactional_id),
            None if meta is None else encode_transaction_value(to_value(meta)))


@dataclass(slots=True)
class ReplayedPartition:
    """The last word on every transactional id of one partition (None: the id expired)."""

    transactions: dict[str, TxnMetadata | None] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0


def replay(partition_log: Log) -> ReplayedPartition:
    """Read one state partition from its start to its high watermark (blocking: run in a thread)."""
    result = ReplayedPartition()
    for data, pos, header, read_from in batches_of(partition_log):
        if header.is_control:
            continue
        for record in decode_records(data, pos, header):
            if header.base_offset + record.offset_delta < read_from or record.key is None:
                continue
            try:
                decoded = decode_transaction_record(bytes(record.key),
                                                    None if record.value is None else bytes(record.value))
                meta = None if decoded is None or decoded.value is None else \
                    from_value(decoded.transactional_id, decoded.value)
            except (DecodeError, ValueError):
                result.skipped += 1
                continue
            if decoded is None:
                result.skipped += 1
                continue
            result.records += 1
            result.transactions[decoded.transactional_id] = meta
    return result


class TransactionStateTopic(InternalTopic):
    """The coordinator's writer; creates the topic with Kafka's settings the first time it is needed."""

    def __init__(self, partitions: CoordinatorPartitions) -> None:
        super().__init__(partitions, TRANSACTION_STATE_TOPIC, partitions_key="transaction.state.log.num.partitions",
                         segment_bytes_key="transaction.state.log.segment.bytes", compression="uncompressed")

    async def write(self, partition: int, transactional_id: str, meta: TxnMetadata | None) -> ErrorCode:
        if not self.exists():
            try:
                await self.ensure_off_loop()
            except (OSError, StorageError) as exc:  # a failing disk, or the partition cap reached
                log.error("cannot create internal topic", topic=TRANSACTION_STATE_TOPIC, error=str(exc))
                return ErrorCode.KAFKA_STORAGE_ERROR
        now = self.partitions.clock_ms()
        key, value = encode(transactional_id, meta)
        written: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

        def done(code: ErrorCode, found: bool) -> None:
            if not written.done():
                # no partition: why (the coordinator maps it); a failed append: the coordinator retries
                written.set_result(code if not found or code is ErrorCode.NONE else ErrorCode.KAFKA_STORAGE_ERROR)

        self.write_batch(partition, lambda _log: build_batch([Record(0, 0, key, value)], base_timestamp=now), now, done)
        return await written
