"""The share groups' `__consumer_offsets` records (KIP-932, kinds 10-15): Kafka's layout, and hostile bytes
refused with `DecodeError` only (the fuzz target of this parser)."""

from __future__ import annotations

import contextlib
import struct
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.protocol.messages import share_group_records as m
from pybroker.protocol.offsets_topic_records import decode_record
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.share_offsets_records import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_METADATA,
    SHARE_RECORD_KINDS,
    ShareRecord,
    share_key,
    share_value,
)

TOPIC = uuid.UUID(int=7)


def test_key_layout_is_kafkas() -> None:
    # the int16 record type, then the key's fields (not flexible): a group id as an int16-sized string
    assert share_key(SHARE_GROUP_METADATA, "g") == b"\x00\x0b\x00\x01g"
    assert share_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m") == b"\x00\x0e\x00\x01g\x00\x01m"


def test_value_layout_is_kafkas() -> None:
    # version 0, flexible: epoch int32, metadata hash int64, no tagged fields
    value = share_value(m.ShareGroupMetadataValue(epoch=3, metadata_hash=-2))
    assert value == b"\x00\x00" + struct.pack(">iq", 3, -2) + b"\x00"
    current = share_value(m.ShareGroupCurrentMemberAssignmentValue(
        member_epoch=5, previous_member_epoch=4, state=0,
        assigned_partitions=[m.TopicPartitions(topic_id=TOPIC, partitions=[0, 2])]))
    assert current == (b"\x00\x00" + struct.pack(">iib", 5, 4, 0) + b"\x02" + TOPIC.bytes
                       + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00\x00")


@given(st.text(max_size=20), st.text(max_size=20), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1),
       st.lists(st.tuples(st.uuids(), st.lists(st.integers(0, 2**31 - 1), max_size=5)), max_size=4))
def test_current_assignment_round_trips(group: str, member: str, epoch: int, previous: int,
                                         parts: list[tuple[uuid.UUID, list[int]]]) -> None:
    value = m.ShareGroupCurrentMemberAssignmentValue(
        member_epoch=epoch, previous_member_epoch=previous, state=0,
        assigned_partitions=[m.TopicPartitions(topic_id=t, partitions=p) for t, p in parts])
    record = decode_record(share_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group, member), share_value(value))
    assert isinstance(record, ShareRecord)
    assert (record.kind, record.group, record.member_id) == (SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group, member)
    assert record.value == value
    tombstone = decode_record(share_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group, member), None)
    assert isinstance(tombstone, ShareRecord) and tombstone.value is None


def test_an_unknown_value_version_is_refused() -> None:
    key = share_key(SHARE_GROUP_METADATA, "g")
    with contextlib.suppress(DecodeError):
        decode_record(key, b"\x00\x01" + b"\x00" * 13)
        raise AssertionError("a value version Kafka never wrote was read")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(SHARE_RECORD_KINDS)), st.binary(max_size=60), st.none() | st.binary(max_size=120))
def test_random_bytes_decode_or_are_refused(kind: int, key_body: bytes, value: bytes | None) -> None:
    with contextlib.suppress(DecodeError):
        decode_record(struct.pack(">h", kind) + key_body, value)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 120), st.integers(0, 255), st.booleans())
def test_mutated_records_decode_or_are_refused(position: int, byte: int, in_key: bool) -> None:
    key = share_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, "group", "member")
    value = share_value(m.ShareGroupCurrentMemberAssignmentValue(
        member_epoch=5, previous_member_epoch=4, state=0,
        assigned_partitions=[m.TopicPartitions(topic_id=TOPIC, partitions=[0, 1, 2])]))
    target = bytearray(key if in_key else value)
    if position < len(target):
        target[position] = byte
    else:
        del target[len(target) // 2:]
    with contextlib.suppress(DecodeError):
        decode_record(bytes(target) if in_key else key, value if in_key else bytes(target))
