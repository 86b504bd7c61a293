"""Keys and values of `__consumer_offsets` records, as bytes: what the group coordinator writes and replays.

Each key and value is an int16 version followed by the message of that version
(`pybroker.protocol.schema.coordinator_records`). We write what Kafka's classic coordinator writes:
offset commits with key version 1 and value version 3 (value version 1 when an explicit expire time is
kept), group metadata with key version 2 and value version 3. Replay accepts every version Kafka ever
wrote for these two record kinds. The consumer protocol's records (KIP-848, key versions 3-8) are
`ConsumerRecord`s, the streams groups' (KIP-1071, key versions 17-23) `StreamsRecord`s
(`streams_offsets_records`), the share groups' (KIP-932, key versions 10-15) `ShareRecord`s
(`share_offsets_records`); other kinds are skipped, so a log written by a newer broker still loads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from pybroker.protocol.messages.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from pybroker.protocol.messages.coordinator_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.share_offsets_records import SHARE_RECORD_KINDS, ShareRecord, decode_share_record
from pybroker.protocol.streams_offsets_records import (
    STREAMS_RECORD_KINDS,
    StreamsRecord,
    decode_streams_record,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    """An offset commit (or, with `value` None, the tombstone of one)."""

    group: str
    topic: str
    partition: int
    value: OffsetCommitValue | None


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group's metadata (or, with `value` None, the tombstone that deletes the group)."""

    group: str
    value: GroupMetadataValue | None


def _versioned(version: int, message: OffsetCommitKey | GroupMetadataKey | OffsetCommitValue | GroupMetadataValue
               ) -> bytes:
    return _VERSION.pack(version) + message.encode(version)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _versioned(OFFSET_COMMIT_KEY_VERSION, OffsetCommitKey(group=group, topic=topic, partition=partition))


def offset_commit_value(value: OffsetCommitValue) -> bytes:
    version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY if value.expire_timestamp >= 0 else OFFSET_COMMIT_VALUE_VERSION
    return _versioned(version, value)


def group_metadata_key(group: str) -> bytes:
    return _versioned(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group=group))


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    return _versioned(GROUP_METADATA_VALUE_VERSION, value)


def _split(data: bytes) -> tuple[int, bytes]:
    if len(data) < _VERSION.size:
        raise DecodeError("coordinator record shorter than its version")
    return _VERSION.unpack_from(data)[0], data


def decode_record(key: bytes | None, value: bytes | None
                  ) -> OffsetRecord | GroupRecord | ConsumerRecord | StreamsRecord | ShareRecord | None:
    """One `__consumer_offsets` record; None for kinds we do not keep. Raises `DecodeError` on bad bytes."""
    if key is None:
        raise DecodeError("coordinator record without a key")
    key_version, _ = _split(key)
    if key_version in (0, 1):
        k = OffsetCommitKey.decode(key, key_version, _VERSION.size)
        offset_value = None
        if value is not None:
            value_version, _ = _split(value)
            offset_value = OffsetCommitValue.decode(value, value_version, _VERSION.size, strict=False)
        return OffsetRecord(k.group, k.topic, k.partition, offset_value)
    if key_version == GROUP_METADATA_KEY_VERSION:
        g = GroupMetadataKey.decode(key, key_version, _VERSION.size)
        group_value = None
        if value is not None:
            value_version, _ = _split(value)
            group_value = GroupMetadataValue.decode(value, value_version, _VERSION.size, strict=False)
        return GroupRecord(g.group, group_value)
    if key_version in CONSUMER_RECORD_KINDS:
        return decode_consumer_record(key_version, key, value)
    if key_version in STREAMS_RECORD_KINDS:
        return decode_streams_record(key_version, key, value)
    if key_version in SHARE_RECORD_KINDS:
        return decode_share_record(key_version, key, value)
    return None


# -- the consumer protocol's records (KIP-848): key versions 3-8 -----------------------------------------
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8

#: key version -> (key class, value class); values are written at version 0
CONSUMER_RECORD_KINDS: dict[int, tuple[Any, Any]] = {
    CONSUMER_GROUP_METADATA: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    CONSUMER_GROUP_PARTITION_METADATA: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    CONSUMER_GROUP_MEMBER_METADATA: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (ConsumerGroupTargetAssignmentMetadataKey,
                                                ConsumerGroupTargetAssignmentMetadataValue),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (ConsumerGroupTargetAssignmentMemberKey,
                                              ConsumerGroupTargetAssignmentMemberValue),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (ConsumerGroupCurrentMemberAssignmentKey,
                                               ConsumerGroupCurrentMemberAssignmentValue),
}
CONSUMER_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One consumer-protocol record: its kind (the key version), group, member (kinds 5, 7, 8) and value
    (None: a tombstone)."""

    kind: int
    group: str
    member_id: str | None
    value: Any


def consumer_key(kind: int, group: str, member_id: str | None = None) -> bytes:
    key_class = CONSUMER_RECORD_KINDS[kind][0]
    key = key_class(group_id=group) if member_id is None else key_class(group_id=group, member_id=member_id)
    return _VERSION.pack(kind) + key.encode(kind)


def consumer_value(value: Any) -> bytes:
    return _VERSION.pack(CONSUMER_VALUE_VERSION) + value.encode(CONSUMER_VALUE_VERSION)


def decode_consumer_record(kind: int, key: bytes, value: bytes | None) -> ConsumerRecord:
    key_class, value_class = CONSUMER_RECORD_KINDS[kind]
    k = key_class.decode(key, kind, _VERSION.size)
    decoded = None
    if value is not None:
        value_version, _ = _split(value)
        if value_version != CONSUMER_VALUE_VERSION:
            raise DecodeError(f"consumer group record value version {value_version} is unknown")
        decoded = value_class.decode(value, value_version, _VERSION.size, strict=False)
    return ConsumerRecord(kind, k.group_id, getattr(k, "member_id", None), decoded)
