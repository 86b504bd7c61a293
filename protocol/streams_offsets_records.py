"""The streams group's `__consumer_offsets` records (KIP-1071) as bytes: keys with their kind as the int16
version (17 group epoch, 19 member metadata, 20 target epoch, 21 member target, 22 member current
assignment, 23 topology), values at version 0. `decode_streams_record` is what replay calls for those
kinds (`offsets_topic_records.decode_record`); kind 18, which Kafka no longer writes, is skipped there.
Pure; any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from pybroker.protocol.messages.streams_group_records import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
)
from pybroker.protocol.primitives import DecodeError

STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23

#: key version -> (key class, value class)
STREAMS_RECORD_KINDS: dict[int, tuple[Any, Any]] = {
    STREAMS_GROUP_METADATA: (StreamsGroupMetadataKey, StreamsGroupMetadataValue),
    STREAMS_GROUP_MEMBER_METADATA: (StreamsGroupMemberMetadataKey, StreamsGroupMemberMetadataValue),
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: (StreamsGroupTargetAssignmentMetadataKey,
                                               StreamsGroupTargetAssignmentMetadataValue),
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: (StreamsGroupTargetAssignmentMemberKey,
                                             StreamsGroupTargetAssignmentMemberValue),
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: (StreamsGroupCurrentMemberAssignmentKey,
                                              StreamsGroupCurrentMemberAssignmentValue),
    STREAMS_GROUP_TOPOLOGY: (StreamsGroupTopologyKey, StreamsGroupTopologyValue),
}
#: kinds Kafka once wrote and no longer does (the topics' metadata, replaced by the hash in kind 17)
RETIRED_STREAMS_KINDS = frozenset({18})
STREAMS_VALUE_VERSION = 0

_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class StreamsRecord:
    """One streams-group record: its kind, group, member (kinds 19, 21, 22) and value (None: a tombstone)."""

    kind: int
    group: str
    member_id: str | None
    value: Any


def streams_key(kind: int, group: str, member_id: str | None = None) -> bytes:
    key_class = STREAMS_RECORD_KINDS[kind][0]
    key = key_class(group_id=group) if member_id is None else key_class(group_id=group, member_id=member_id)
    return _VERSION.pack(kind) + key.encode(kind)


def streams_value(value: Any) -> bytes:
    return _VERSION.pack(STREAMS_VALUE_VERSION) + value.encode(STREAMS_VALUE_VERSION)


def decode_streams_record(kind: int, key: bytes, value: bytes | None) -> StreamsRecord:
    """Raises `DecodeError` on bad bytes or an unknown value version."""
    key_class, value_class = STREAMS_RECORD_KINDS[kind]
    k = key_class.decode(key, kind, _VERSION.size)
    decoded = None
    if value is not None:
        if len(value) < _VERSION.size:
            raise DecodeError("streams group record value shorter than its version")
        (value_version,) = _VERSION.unpack_from(value)
        if value_version != STREAMS_VALUE_VERSION:
            raise DecodeError(f"streams group record value version {value_version} is unknown")
        decoded = value_class.decode(value, value_version, _VERSION.size, strict=False)
    return StreamsRecord(kind, k.group_id, getattr(k, "member_id", None), decoded)
