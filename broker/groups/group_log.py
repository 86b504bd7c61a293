"""The coordinator's side of persistence: what it writes through, and what a failed write tells clients.

The coordinator never touches files: it hands (key, value) records to a `GroupLog` and acts in the
completion callback. `offsets_topic.OffsetsTopic` is the real one; tests pass a fake that completes at
once or on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pybroker.protocol.errors import ErrorCode

Records = list[tuple[bytes, bytes | None]]
Done = Callable[[ErrorCode], None]

#: what a failed write of the offsets topic tells the client (Kafka maps storage trouble to retriable codes)
WRITE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def client_error(code: ErrorCode) -> ErrorCode:
    if code is ErrorCode.NONE:
        return code
    return WRITE_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)


class GroupLog(Protocol):
    """Where the coordinator's records go: one `__consumer_offsets` partition per group."""

    def append(self, partition: int, records: Records, now_ms: int, done: Done) -> None:
        """Write `records` (key, value-or-None) and call `done` once they are durable, or failed."""
