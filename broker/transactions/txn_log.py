"""The coordinator's side of persistence: where state changes go, where markers go, and what a failed
write tells clients.

The coordinator never touches files: it hands each new `TxnMetadata` (None: the id expired, a
tombstone) to a `TxnLog` and adopts it only if the write (fsynced) succeeded, and it completes a
prepared transaction through a `MarkerWriter`. `state_topic.TransactionStateTopic` and
`markers.write_markers` are the real ones; tests pass fakes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from pybroker.broker.transactions.metadata import TopicPartition, TxnMetadata
from pybroker.protocol.errors import ErrorCode

#: (producer id, producer epoch, coordinator epoch, commit, partitions) -> a code per partition
MarkerWriter = Callable[[int, int, int, bool, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]

#: what a failed write of `__transaction_state` tells the client (Kafka's `appendTransactionToLog`)
WRITE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
}


def client_error(code: ErrorCode) -> ErrorCode:
    if code is ErrorCode.NONE:
        return code
    return WRITE_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)


class TxnLog(Protocol):
    """Where the coordinator's records go: one `__transaction_state` partition per transactional id."""

    async def write(self, partition: int, transactional_id: str, meta: TxnMetadata | None) -> ErrorCode:
        """Append the record of `meta` (a tombstone for None) and return once it is fsynced, or failed."""
        ...
