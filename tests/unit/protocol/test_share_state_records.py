"""`__share_group_state` records: Kafka's layout, round trips, and hostile bytes refused cleanly.

The record decoder reads what replay finds on disk, so it is a parser of untrusted bytes: random and
mutated keys and values must decode or raise `DecodeError` (skipped by replay), never anything else.
"""

from __future__ import annotations

import contextlib
import struct
import uuid

from hypothesis import given
from hypothesis import strategies as st

from pybroker.protocol.messages.share_state_records import (
    ShareSnapshotValue,
    ShareUpdateValue,
    SnapshotStateBatch,
    UpdateStateBatch,
)
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.share_state_records import (
    SNAPSHOT_TYPE,
    UPDATE_TYPE,
    decode_share_state_record,
    encode_snapshot_key,
    encode_snapshot_value,
    encode_update_key,
    encode_update_value,
)

TOPIC = uuid.UUID("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9")


def test_key_layout_is_kafkas() -> None:
    # int16 record type, then group (int16-length string), topic id (16 bytes), partition (int32)
    assert encode_snapshot_key("g1", TOPIC, 7) == struct.pack(">hh2s16si", 0, 2, b"g1", TOPIC.bytes, 7)
    assert encode_update_key("g1", TOPIC, 7)[:2] == struct.pack(">h", 1)


def test_snapshot_value_layout() -> None:
    value = ShareSnapshotValue(snapshot_epoch=3, state_epoch=1, leader_epoch=0, start_offset=10,
                               delivery_complete_count=2, create_timestamp=5, write_timestamp=6,
                               state_batches=[SnapshotStateBatch(first_offset=10, last_offset=11, delivery_state=2,
                                                                 delivery_count=1)])
    raw = encode_snapshot_value(value)
    # version 0, then flexible: epochs, start offset, timestamps, a compact array of one batch, tagged field 0
    head = struct.pack(">hiiiqqq", 0, 3, 1, 0, 10, 5, 6)
    assert raw.startswith(head)
    assert raw[len(head)] == 2  # compact array length 1 + 1
    record = decode_share_state_record(encode_snapshot_key("g1", TOPIC, 7), raw)
    assert record is not None and record.record_type == SNAPSHOT_TYPE and record.value == value


@given(st.text(max_size=30), st.integers(0, 2**31 - 1), st.integers(-1, 2**62),
       st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 100), st.sampled_from([0, 2, 4]),
                          st.integers(0, 2**15 - 1)), max_size=5))
def test_records_round_trip(group: str, partition: int, start: int, rows: list[tuple[int, int, int, int]]) -> None:
    value = ShareUpdateValue(snapshot_epoch=1, leader_epoch=0, start_offset=start, state_batches=[
        UpdateStateBatch(first_offset=f, last_offset=f + n, delivery_state=s, delivery_count=c) for f, n, s, c in rows])
    record = decode_share_state_record(encode_update_key(group, TOPIC, partition), encode_update_value(value))
    assert record is not None and record.record_type == UPDATE_TYPE
    assert (record.group_id, record.topic_id, record.partition, record.value) == (group, TOPIC, partition, value)


def test_other_record_types_are_skipped_and_tombstones_kept() -> None:
    assert decode_share_state_record(struct.pack(">h", 9) + b"anything", b"\x00\x00") is None
    record = decode_share_state_record(encode_snapshot_key("g", TOPIC, 0), None)
    assert record is not None and record.value is None


@given(st.binary(max_size=80), st.one_of(st.none(), st.binary(max_size=120)))
def test_random_bytes_decode_or_are_refused(key: bytes, value: bytes | None) -> None:
    with contextlib.suppress(DecodeError):  # refused cleanly; any other exception fails
        decode_share_state_record(key, value)


@given(st.integers(0, 200), st.integers(0, 255), st.booleans())
def test_mutated_records_decode_or_are_refused(position: int, byte: int, in_key: bool) -> None:
    key = bytearray(encode_snapshot_key("group", TOPIC, 1))
    value = bytearray(encode_snapshot_value(ShareSnapshotValue(
        snapshot_epoch=1, state_epoch=0, leader_epoch=0, start_offset=4, create_timestamp=1, write_timestamp=2,
        state_batches=[SnapshotStateBatch(first_offset=4, last_offset=9, delivery_state=0, delivery_count=2)])))
    target = key if in_key else value
    target[position % len(target)] = byte
    with contextlib.suppress(DecodeError):
        decode_share_state_record(bytes(key), bytes(value))
