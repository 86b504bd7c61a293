"""Keys and values of `__transaction_state` records, as bytes: what the transaction coordinator writes and replays.

Each key and value is an int16 version followed by the message of that version
(`pybroker.protocol.schema.transaction_records`), as Kafka's TransactionLog writes them. The key's
version is always 0 (Kafka's coordinator record type for the transaction log). Kafka picks the value's
version from the finalized `transaction.version` feature: 0 at level 0, 1 (flexible, with the tagged
producer-id fields) from level 1 on; we finalize level 1 or more, so we write 1. Replay reads both and
skips keys of other versions, as Kafka does; a value of a version Kafka never wrote, or with a state id
Kafka does not define, is a `DecodeError`.

The state byte is Kafka's `TransactionState` id; `TransactionStatus` names them, with the names
DescribeTransactions and ListTransactions answer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from pybroker.protocol.messages.transaction_records import (
    PartitionsSchema,
    TransactionLogKey,
    TransactionLogValue,
)
from pybroker.protocol.primitives import DecodeError

TRANSACTION_LOG_KEY_VERSION = 0
#: the value version written once `transaction.version` is finalized at 1 or more (v0 has no tagged fields)
TRANSACTION_LOG_VALUE_VERSION = 1

_VERSION = struct.Struct(">h")


class TransactionStatus(IntEnum):
    """Kafka's transaction states by their id in the log (`TransactionLogValue.transaction_status`)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name of the state, as DescribeTransactions/ListTransactions answer it ("PrepareCommit")."""
        return STATE_NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionStatus | None:
        """The state Kafka calls `name` (a ListTransactions state filter), or None for a name Kafka has not."""
        return _BY_NAME.get(name)


STATE_NAMES: dict[TransactionStatus, str] = {
    TransactionStatus.EMPTY: "Empty",
    TransactionStatus.ONGOING: "Ongoing",
    TransactionStatus.PREPARE_COMMIT: "PrepareCommit",
    TransactionStatus.PREPARE_ABORT: "PrepareAbort",
    TransactionStatus.COMPLETE_COMMIT: "CompleteCommit",
    TransactionStatus.COMPLETE_ABORT: "CompleteAbort",
    TransactionStatus.DEAD: "Dead",
    TransactionStatus.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: status for status, name in STATE_NAMES.items()}


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    """One transactional id's state (or, with `value` None, the tombstone that forgets the id)."""

    transactional_id: str
    value: TransactionLogValue | None


def transaction_log_value(
    *,
    producer_id: int,
    producer_epoch: int,
    transaction_timeout_ms: int,
    status: TransactionStatus,
    partitions: Iterable[tuple[str, int]] = (),
    last_update_timestamp_ms: int,
    start_timestamp_ms: int,
    previous_producer_id: int = -1,
    next_producer_id: int = -1,
    next_producer_epoch: int = -1,
    client_transaction_version: int = 0,
) -> TransactionLogValue:
    """A value as Kafka builds one: partitions grouped by topic (in first-seen order), null while Empty.

    Kafka refuses to write an Empty state that still holds partitions; so does this (ValueError).
    """
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if status == TransactionStatus.EMPTY and by_topic:
        raise ValueError("an Empty transaction holds no partitions")
    grouped = None if status == TransactionStatus.EMPTY else [
        PartitionsSchema(topic=topic, partition_ids=ids) for topic, ids in by_topic.items()]
    return TransactionLogValue(
        producer_id=producer_id,
        previous_producer_id=previous_producer_id,
        next_producer_id=next_producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=transaction_timeout_ms,
        transaction_status=int(status),
        transaction_partitions=grouped,
        transaction_last_update_timestamp_ms=last_update_timestamp_ms,
        transaction_start_timestamp_ms=start_timestamp_ms,
        client_transaction_version=client_transaction_version,
        next_producer_epoch=next_producer_epoch,
    )


def partitions_of(value: TransactionLogValue) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a value's transaction; none while Empty, as Kafka reads it."""
    if value.transaction_status == TransactionStatus.EMPTY or value.transaction_partitions is None:
        return []
    return [(p.topic, pid) for p in value.transaction_partitions for pid in p.partition_ids]


def encode_transaction_key(transactional_id: str) -> bytes:
    return _VERSION.pack(TRANSACTION_LOG_KEY_VERSION) + TransactionLogKey(transactional_id=transactional_id).encode(0)


def encode_transaction_value(value: TransactionLogValue, version: int = TRANSACTION_LOG_VALUE_VERSION) -> bytes:
    """The value bytes; `version` 0 drops the tagged fields, as Kafka's v0 (transactions v1) does."""
    return _VERSION.pack(version) + value.encode(version)


def decode_transaction_record(key: bytes, value: bytes | None) -> TransactionRecord | None:
    """One `__transaction_state` record; None for a key version Kafka does not write here.

    Raises `DecodeError` on bad bytes, an unknown value version or an unknown state id.
    """
    if len(key) < _VERSION.size:
        raise DecodeError("transaction log key shorter than its version")
    (key_version,) = _VERSION.unpack_from(key)
    if key_version != TRANSACTION_LOG_KEY_VERSION:
        return None
    transactional_id = TransactionLogKey.decode(key, key_version, _VERSION.size).transactional_id
    if value is None:
        return TransactionRecord(transactional_id, None)
    if len(value) < _VERSION.size:
        raise DecodeError("transaction log value shorter than its version")
    (value_version,) = _VERSION.unpack_from(value)
    if not TransactionLogValue.MIN_VERSION <= value_version <= TransactionLogValue.MAX_VERSION:
        raise DecodeError(f"transaction log value version {value_version} is unknown")
    decoded = TransactionLogValue.decode(value, value_version, _VERSION.size, strict=False)
    if decoded.transaction_status not in _KNOWN_STATUS:
        raise DecodeError(f"transaction log state id {decoded.transaction_status} is unknown")
    return TransactionRecord(transactional_id, decoded)


_KNOWN_STATUS = frozenset(int(s) for s in TransactionStatus)
