"""Keys and values of `__consumer_offsets` records, as bytes: what the group coordinator writes and replays.

Each key and value is an int16 version followed by the message of that version
(`pybroker.protocol.schema.coordinator_records`). We write what Kafka's classic coordinator writes:
offset commits with key version 1 and value version 3 (value version 1 when an explicit expire time is
kept), group metadata with key version 2 and value version 3. Replay accepts every version Kafka ever
wrote for these two record kinds and skips other kinds (the newer consumer-protocol records), so a log
written by a newer broker still loads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pybroker.protocol.messages.coordinator_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from pybroker.protocol.primitives import DecodeError

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


def decode_record(key: bytes | None, value: bytes | None) -> OffsetRecord | GroupRecord | None:
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
    return None
