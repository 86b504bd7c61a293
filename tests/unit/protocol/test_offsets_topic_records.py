"""`__consumer_offsets` keys and values: byte layouts Kafka would read, and round trips of every version."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from pybroker.protocol.messages.coordinator_records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
)
from pybroker.protocol.offsets_topic_records import (
    GroupRecord,
    OffsetRecord,
    decode_record,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)

text = st.text(max_size=20)


def test_offset_commit_key_layout_is_kafkas() -> None:
    # version 1, then group, topic (int16-length strings) and partition
    assert offset_commit_key("g", "t", 3) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + struct.pack(">i", 3)
    assert group_metadata_key("g") == b"\x00\x02\x00\x01g"


def test_offset_commit_value_v3_layout() -> None:
    value = offset_commit_value(OffsetCommitValue(offset=5, leader_epoch=2, metadata="m", commit_timestamp=9))
    assert value == b"\x00\x03" + struct.pack(">qi", 5, 2) + b"\x00\x01m" + struct.pack(">q", 9)


def test_value_with_an_expiry_is_written_as_v1() -> None:
    value = offset_commit_value(OffsetCommitValue(offset=5, metadata="", commit_timestamp=9, expire_timestamp=99))
    assert value[:2] == b"\x00\x01"
    record = decode_record(offset_commit_key("g", "t", 0), value)
    assert isinstance(record, OffsetRecord) and record.value is not None
    assert record.value.expire_timestamp == 99


@given(text, text, st.integers(0, 2**31 - 1), st.integers(-1, 2**62), st.integers(-1, 2**31 - 1), text,
       st.integers(0, 2**62))
def test_offset_records_round_trip(group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str,
                                   ts: int) -> None:
    value = OffsetCommitValue(offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=ts)
    record = decode_record(offset_commit_key(group, topic, partition), offset_commit_value(value))
    assert record == OffsetRecord(group, topic, partition, value)
    assert decode_record(offset_commit_key(group, topic, partition), None) == OffsetRecord(group, topic, partition,
                                                                                          None)


@given(text, st.lists(st.tuples(text, st.none() | text, st.binary(max_size=30), st.binary(max_size=30)), max_size=4),
       st.none() | text)
def test_group_records_round_trip(group: str, members: list, protocol: str | None) -> None:
    value = GroupMetadataValue(
        protocol_type="consumer", generation=3, protocol=protocol, leader=members[0][0] if members else None,
        current_state_timestamp=123,
        members=[MemberMetadata(member_id=m, group_instance_id=i, client_id="c", client_host="/h",
                                rebalance_timeout=1, session_timeout=2, subscription=s, assignment=a)
                 for m, i, s, a in members])
    assert decode_record(group_metadata_key(group), group_metadata_value(value)) == GroupRecord(group, value)


def test_older_versions_are_read_and_unknown_kinds_skipped() -> None:
    legacy_key = b"\x00\x00" + offset_commit_key("g", "t", 1)[2:]
    v0 = b"\x00\x00" + OffsetCommitValue(offset=7, metadata="", commit_timestamp=1).encode(0)
    record = decode_record(legacy_key, v0)
    assert isinstance(record, OffsetRecord) and record.value is not None and record.value.offset == 7
    assert decode_record(b"\x00\x09\x00\x01g", b"\x00\x00") is None  # a kind Kafka no longer writes
    assert decode_record(b"\x00\x10\x00\x01g", b"\x00\x00") is None  # a kind we do not keep
