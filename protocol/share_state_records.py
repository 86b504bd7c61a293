"""Keys and values of `__share_group_state` records, as bytes: what the share coordinator writes and replays.

Each key and value is an int16 version followed by the message (`pybroker.protocol.schema.share_state_records`),
as Kafka's share coordinator writes them: the key's version is the record type (0 ShareSnapshot, 1
ShareUpdate), the value's is 0. A snapshot holds a share-partition's whole state; an update the state
batches changed since, applied over the snapshot before it. Replay reads both; a key of another version is
skipped (None), as Kafka skips record types it does not know.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from pybroker.protocol.messages.share_state_records import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)
from pybroker.protocol.primitives import DecodeError

SNAPSHOT_TYPE = 0
UPDATE_TYPE = 1
VALUE_VERSION = 0
_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """One record: its key (group, topic id, partition), its type, and its value (None: a tombstone)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int
    record_type: int
    value: ShareSnapshotValue | ShareUpdateValue | None


def encode_snapshot_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _VERSION.pack(SNAPSHOT_TYPE) + ShareSnapshotKey(
        group_id=group_id, topic_id=topic_id, partition=partition).encode(SNAPSHOT_TYPE)


def encode_snapshot_value(value: ShareSnapshotValue) -> bytes:
    return _VERSION.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def encode_update_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _VERSION.pack(UPDATE_TYPE) + ShareUpdateKey(
        group_id=group_id, topic_id=topic_id, partition=partition).encode(UPDATE_TYPE)


def encode_update_value(value: ShareUpdateValue) -> bytes:
    return _VERSION.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def decode_share_state_record(key: bytes, value: bytes | None) -> ShareStateRecord | None:
    """A record of `__share_group_state`, or None for a record type we do not know. Raises `DecodeError`."""
    if len(key) < _VERSION.size:
        raise DecodeError("share state key shorter than its version")
    (record_type,) = _VERSION.unpack_from(key, 0)
    key_cls: type[ShareSnapshotKey] | type[ShareUpdateKey]
    if record_type == SNAPSHOT_TYPE:
        key_cls = ShareSnapshotKey
    elif record_type == UPDATE_TYPE:
        key_cls = ShareUpdateKey
    else:
        return None
    decoded_key = key_cls.decode(key, record_type, _VERSION.size)
    decoded_value: ShareSnapshotValue | ShareUpdateValue | None = None
    if value is not None:
        if len(value) < _VERSION.size:
            raise DecodeError("share state value shorter than its version")
        (version,) = _VERSION.unpack_from(value, 0)
        if version != VALUE_VERSION:
            raise DecodeError(f"share state value version {version} is unknown")
        value_cls = ShareSnapshotValue if record_type == SNAPSHOT_TYPE else ShareUpdateValue
        decoded_value = value_cls.decode(value, version, _VERSION.size, strict=False)
    return ShareStateRecord(decoded_key.group_id, decoded_key.topic_id, decoded_key.partition, record_type,
                            decoded_value)
