"""The coordinator's side of persistence: what it writes through, and what a failed write tells clients.

The coordinator never touches files: it hands (key, value) records to a `GroupLog` and acts in the
completion callback. `offsets_topic.OffsetsTopic` is the real one; tests pass a fake that completes at
once or on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

#: what `GroupLog.append` returns when nothing was written (`done` then reports why)
from pybroker.broker.coordinator.internal_topic import NOT_WRITTEN as NOT_WRITTEN
from pybroker.protocol.errors import ErrorCode

Records = list[tuple[bytes, bytes | None]]
Done = Callable[[ErrorCode], None]
#: (producer id, producer epoch) of a transactional write (TxnOffsetCommit)
Producer = tuple[int, int]

#: what a failed write of the offsets topic tells the client (Kafka maps storage trouble to retriable codes)
WRITE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


#: a transactional write refused by the partition's producer state: the producer's own problem, told as it is
PRODUCER_ERRORS = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED,
                             ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_TXN_STATE,
                             ErrorCode.TRANSACTION_COORDINATOR_FENCED})


def client_error(code: ErrorCode) -> ErrorCode:
    if code is ErrorCode.NONE or code in PRODUCER_ERRORS:
        return code
    return WRITE_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)


class GroupLog(Protocol):
    """Where the coordinator's records go: one `__consumer_offsets` partition per group."""

    def append(self, partition: int, records: Records, now_ms: int, done: Done, *,
               producer: Producer | None = None) -> int:
        """Write `records` (key, value-or-None) as one batch and call `done` once they are durable, or
        failed. With `producer`, the batch is transactional, written under that producer id and epoch.

        Returns the offset the batch's first record got (record i is at that offset + i), or
        `NOT_WRITTEN` when it was refused at once.
        """
