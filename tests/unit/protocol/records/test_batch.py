"""The v2 batch header: layout against Kafka's documented offsets, parsing, walking, CRC and patching."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records import batch
from pybroker.protocol.records.batch import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    RecordsError,
    attributes_for,
    compute_crc,
    crc_ok,
    iter_batches,
    parse_header,
    patch_base_offset,
    patch_leader_epoch,
    rewrite_crc,
)
from pybroker.protocol.records.record import build_batch
from tests.unit.protocol.records.samples import sample_records

# DefaultRecordBatch's offsets, as Kafka's RecordBatch v2 documentation lists them
KAFKA_OFFSETS = {
    "BASE_OFFSET_OFFSET": 0, "BATCH_LENGTH_OFFSET": 8, "PARTITION_LEADER_EPOCH_OFFSET": 12, "MAGIC_OFFSET": 16,
    "CRC_OFFSET": 17, "ATTRIBUTES_OFFSET": 21, "LAST_OFFSET_DELTA_OFFSET": 23, "BASE_TIMESTAMP_OFFSET": 27,
    "MAX_TIMESTAMP_OFFSET": 35, "PRODUCER_ID_OFFSET": 43, "PRODUCER_EPOCH_OFFSET": 51,
    "BASE_SEQUENCE_OFFSET": 53, "RECORDS_COUNT_OFFSET": 57, "RECORDS_OFFSET": 61,
}


def _sample(**kw: object) -> bytes:
    return build_batch(sample_records(), base_timestamp=1000, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "offset"), sorted(KAFKA_OFFSETS.items()))
def test_field_offsets_are_kafkas(name: str, offset: int) -> None:
    assert getattr(batch, name) == offset


def test_header_struct_matches_the_named_tuple() -> None:
    assert (HEADER_SIZE, LOG_OVERHEAD, batch.MIN_BATCH_LENGTH) == (61, 12, 49)
    assert BatchHeader._fields == tuple(name for name, _ in batch._FIELDS)
    values = tuple(range(1, 14))
    assert parse_header(HEADER.pack(*values)) == values


def test_properties_read_the_attribute_bits() -> None:
    header = parse_header(_sample(compression=3, timestamp_type=1, is_transactional=True, producer_id=9,
                                  producer_epoch=0, base_sequence=2147483646, base_offset=100))
    assert (header.compression, header.timestamp_type, header.is_transactional) == (3, 1, True)
    assert (header.is_control, header.has_delete_horizon, header.has_producer_id) == (False, False, True)
    assert (header.last_offset, header.next_offset, header.size) == (102, 103, len(_sample(compression=3)))
    assert header.last_sequence == 0  # 2147483646 + 2 wraps at int32, as producers do
    control = parse_header(_sample(is_control=True, has_delete_horizon=True))
    assert (control.is_control, control.has_delete_horizon, control.has_producer_id) == (True, True, False)
    assert control.last_sequence == -1


def test_attributes_for_composes_kafkas_word() -> None:
    assert attributes_for() == 0
    assert attributes_for(4, 1, is_transactional=True, is_control=True, has_delete_horizon=True) == 0x7C
    assert attributes_for(0x0F) == 0x07  # only the codec bits of the codec argument


def test_parse_header_refuses_short_buffers() -> None:
    raw = _sample()
    with pytest.raises(RecordsError) as info:
        parse_header(raw[:60])
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(RecordsError):
        parse_header(raw, len(raw) - 60)
    with pytest.raises(RecordsError):
        parse_header(raw, -1)
    assert parse_header(b"\x00" * 5 + raw, 5) == parse_header(raw)


def test_iter_batches_walks_whole_batches_and_stops_at_a_tail() -> None:
    first, second = _sample(), _sample(base_offset=3)
    log = first + second
    assert [(pos, h.base_offset) for pos, h in iter_batches(log)] == [(0, 0), (len(first), 3)]
    assert [pos for pos, _ in iter_batches(log + second[:70])] == [0, len(first)]
    assert [pos for pos, _ in iter_batches(log + second[:30])] == [0, len(first)]
    assert [pos for pos, _ in iter_batches(log, len(first))] == [len(first)]
    assert [pos for pos, _ in iter_batches(log, 0, len(log) - 1)] == [0]
    assert [pos for pos, _ in iter_batches(log, 0, len(log) + 100)] == [0, len(first)]
    assert list(iter_batches(b"")) == []
    assert list(iter_batches(b"\x00" * HEADER_SIZE)) == []  # length 0 is below the minimum


def test_iter_batches_stops_at_an_impossible_length() -> None:
    raw = bytearray(_sample() * 2)
    struct.pack_into(">i", raw, len(raw) // 2 + 8, 10)
    assert [pos for pos, _ in iter_batches(raw)] == [0]


def test_crc_covers_attributes_to_the_end() -> None:
    raw = bytearray(_sample())
    header = parse_header(raw)
    assert crc_ok(raw, 0, header)
    for position in (batch.ATTRIBUTES_OFFSET, batch.MAX_TIMESTAMP_OFFSET + 3, batch.RECORDS_COUNT_OFFSET, len(raw) - 1):
        flipped = bytearray(raw)
        flipped[position] ^= 0x01
        assert not crc_ok(flipped, 0, parse_header(flipped)), position
    assert not crc_ok(raw[:-1], 0, header)  # a truncated batch never passes


def test_rewrite_crc_repairs_a_changed_batch() -> None:
    raw = bytearray(_sample())
    struct.pack_into(">q", raw, batch.MAX_TIMESTAMP_OFFSET, 42)
    assert not crc_ok(raw, 0, parse_header(raw))
    assert rewrite_crc(raw, 0) == compute_crc(raw, 0, parse_header(raw))
    assert crc_ok(raw, 0, parse_header(raw))
    with pytest.raises(RecordsError):
        rewrite_crc(raw[:-1], 0)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**63 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(0, 3))
def test_patching_offset_and_epoch_keeps_the_crc(offset: int, epoch: int, prefix: int) -> None:
    raw = bytearray(b"\xee" * prefix + _sample())
    before = parse_header(raw, prefix)
    patch_base_offset(raw, prefix, offset)
    patch_leader_epoch(memoryview(raw), prefix, epoch)
    after = parse_header(raw, prefix)
    assert (after.base_offset, after.partition_leader_epoch) == (offset, epoch)
    assert after._replace(base_offset=before.base_offset, partition_leader_epoch=before.partition_leader_epoch) == before
    assert crc_ok(raw, prefix, after)
    assert raw[:prefix] == b"\xee" * prefix


@given(st.integers(0, 2**63 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(0, 3))
def test_assign_offsets_returns_the_header_a_parse_would(offset: int, epoch: int, prefix: int) -> None:
    raw = bytearray(b"\xee" * prefix + _sample(producer_id=7, producer_epoch=1, base_sequence=4))
    header = batch.assign_offsets(raw, prefix, parse_header(raw, prefix), offset, epoch)
    assert type(header) is BatchHeader and header == parse_header(raw, prefix)
    assert (header.base_offset, header.partition_leader_epoch) == (offset, epoch)
    assert crc_ok(raw, prefix, header) and raw[:prefix] == b"\xee" * prefix


@pytest.mark.parametrize(("timestamp_type", "max_timestamp"), [(batch.LOG_APPEND_TIME, 99_999), (batch.CREATE_TIME, 5)])
@pytest.mark.parametrize("codec", [0, 1])
def test_restamp_returns_the_header_a_parse_would(timestamp_type: int, max_timestamp: int, codec: int) -> None:
    raw = bytearray(b"\xee" + _sample(compression=codec, is_transactional=True))
    header = batch.restamp(raw, 1, parse_header(raw, 1), timestamp_type, max_timestamp)
    assert header == parse_header(raw, 1) and crc_ok(raw, 1, header)
    assert (header.timestamp_type, header.max_timestamp) == (timestamp_type, max_timestamp)
    assert (header.compression, header.is_transactional) == (codec, True)
