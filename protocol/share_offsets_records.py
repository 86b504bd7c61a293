"""The share group's `__consumer_offsets` records (KIP-932) as bytes: keys with their kind as the int16
version (10 member metadata, 11 group epoch, 12 target epoch, 13 member target, 14 member current
assignment, 15 the share-partitions' initialization), values at version 0. `decode_share_record` is what
replay calls for those kinds (`offsets_topic_records.decode_record`); kind 9, which Kafka no longer writes,
is skipped there. Pure; any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from pybroker.protocol.messages.share_group_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)
from pybroker.protocol.primitives import DecodeError

SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15

#: key version -> (key class, value class)
SHARE_RECORD_KINDS: dict[int, tuple[Any, Any]] = {
    SHARE_GROUP_MEMBER_METADATA: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    SHARE_GROUP_METADATA: (ShareGroupMetadataKey, ShareGroupMetadataValue),
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: (ShareGroupTargetAssignmentMetadataKey,
                                             ShareGroupTargetAssignmentMetadataValue),
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue),
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: (ShareGroupCurrentMemberAssignmentKey,
                                            ShareGroupCurrentMemberAssignmentValue),
    SHARE_GROUP_STATE_PARTITION_METADATA: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue),
}
#: kinds Kafka once wrote and no longer does (the subscribed topics' metadata, replaced by the hash in kind 11)
RETIRED_SHARE_KINDS = frozenset({9})
SHARE_VALUE_VERSION = 0

_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class ShareRecord:
    """One share-group record: its kind, group, member (kinds 10, 13, 14) and value (None: a tombstone)."""

    kind: int
    group: str
    member_id: str | None
    value: Any


def share_key(kind: int, group: str, member_id: str | None = None) -> bytes:
    key_class = SHARE_RECORD_KINDS[kind][0]
    key = key_class(group_id=group) if member_id is None else key_class(group_id=group, member_id=member_id)
    return _VERSION.pack(kind) + key.encode(kind)


def share_value(value: Any) -> bytes:
    return _VERSION.pack(SHARE_VALUE_VERSION) + value.encode(SHARE_VALUE_VERSION)


def decode_share_record(kind: int, key: bytes, value: bytes | None) -> ShareRecord:
    """Raises `DecodeError` on bad bytes or an unknown value version."""
    key_class, value_class = SHARE_RECORD_KINDS[kind]
    k = key_class.decode(key, kind, _VERSION.size)
    decoded = None
    if value is not None:
        if len(value) < _VERSION.size:
            raise DecodeError("share group record value shorter than its version")
        (value_version,) = _VERSION.unpack_from(value)
        if value_version != SHARE_VALUE_VERSION:
            raise DecodeError(f"share group record value version {value_version} is unknown")
        decoded = value_class.decode(value, value_version, _VERSION.size, strict=False)
    return ShareRecord(kind, k.group_id, getattr(k, "member_id", None), decoded)
