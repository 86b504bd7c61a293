"""Records inside a batch: varints, decoding hostile bytes, building batches, LogAppendTime."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    RecordsError,
    crc_ok,
    parse_header,
    patch_attributes,
    rewrite_crc,
)
from pybroker.protocol.records.record import (
    Record,
    build_batch,
    decode_body,
    decode_records,
    encode_record,
    read_varint,
    read_varlong,
    set_log_append_time,
    varint_size,
    write_varint,
)
from tests.unit.protocol.records.samples import BASE_TIMESTAMP, CODECS, rows_of, sample_records

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

# zigzag encodings as Kafka's ByteUtils writes them
KNOWN_VARINTS = [
    (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804"),
    (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
    (2**63 - 1, "feffffffffffffffff01"), (-(2**63), "ffffffffffffffffff01"),
]


def _varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


@pytest.mark.parametrize(("value", "encoded"), KNOWN_VARINTS)
def test_known_varints(value: int, encoded: str) -> None:
    assert _varint(value).hex() == encoded
    assert varint_size(value) == len(encoded) // 2
    assert read_varlong(bytes.fromhex(encoded) + b"\xff", 0) == (value, len(encoded) // 2)
    if -(2**31) <= value < 2**31:
        assert read_varint(b"\x00" + bytes.fromhex(encoded), 1) == (value, 1 + len(encoded) // 2)


@given(INT32)
def test_varint_round_trip(value: int) -> None:
    encoded = _varint(value)
    assert read_varint(encoded, 0) == (value, len(encoded)) and len(encoded) == varint_size(value) <= 5


@given(INT64)
def test_varlong_round_trip(value: int) -> None:
    encoded = _varint(value)
    assert read_varlong(encoded, 0) == (value, len(encoded)) and len(encoded) == varint_size(value) <= 10


@pytest.mark.parametrize(("raw", "reader"), [
    (b"", read_varint), (b"\x80", read_varint), (b"\xff\xff", read_varlong),  # truncated
    (b"\x80" * 5 + b"\x00", read_varint), (b"\x80" * 10 + b"\x00", read_varlong),  # too long
    (b"\xff\xff\xff\xff\x1f", read_varint), (b"\xff" * 9 + b"\x03", read_varlong),  # wider than the type
])
def test_hostile_varints(raw: bytes, reader: object) -> None:
    with pytest.raises(RecordsError) as info:
        reader(raw, 0)  # type: ignore[operator]
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_write_varint_refuses_numbers_beyond_int64() -> None:
    with pytest.raises(ValueError):
        _varint(2**63)


def _body(*records: Record) -> bytes:
    out = bytearray()
    for record in records:
        encode_record(out, record)
    return bytes(out)


def _bad_body(fields: list[int | bytes]) -> bytes:
    """A record from raw fields: ints are written as varints, bytes as they are."""
    body = bytearray(b"\x00")  # attributes
    for item in fields:
        if isinstance(item, int):
            write_varint(body, item)
        else:
            body += item
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


@pytest.mark.parametrize(("body", "count"), [
    (_bad_body([0, 0, 5, b"ab", -1, 0]), 1),  # key longer than the record
    (_bad_body([0, 0, -1, -1, -1]), 1),  # negative header count
    (_bad_body([0, 0, -1, -1, 1, -1, -1]), 1),  # null header key
    (_bad_body([0, 0, -1, -1, 0, b"x"]), 1),  # bytes left inside the record
    (_bad_body([0, 0, -1, -1, 0]) + b"\x00", 1),  # bytes after the last record
    (_bad_body([0, 0, -1, -1, 0]), 2),  # fewer records than counted
    (_bad_body([0, 0, -1, -1, 0]), -1),  # negative count
    (b"\x00", 1),  # zero-length record
    (b"\x20\x00", 1),  # record length beyond the body
    (b"\x80\x80\x80\x80\x80\x01", 1),  # runaway varint
])
def test_malformed_records_are_corrupt(body: bytes, count: int) -> None:
    with pytest.raises(RecordsError) as info:
        decode_body(body, count)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_negative_lengths_read_as_null_as_in_kafka() -> None:
    assert decode_body(_bad_body([0, 0, -7, -3, 1, 1, b"h", -9]), 1) == [Record(0, 0, None, None, [("h", None)])]


def test_header_keys_keep_their_exact_bytes() -> None:
    raw_key = b"\xff\xfe not utf-8"
    record = decode_body(_bad_body([0, 0, -1, -1, 1, len(raw_key), raw_key, 0]), 1)[0]
    assert _body(record) == _bad_body([0, 0, -1, -1, 1, len(raw_key), raw_key, 0])


def test_build_batch_header_fields() -> None:
    raw = build_batch(sample_records(), base_offset=5, compression=2, base_timestamp=BASE_TIMESTAMP,
                      producer_id=9, producer_epoch=3, base_sequence=11, is_transactional=True,
                      partition_leader_epoch=4)
    header = parse_header(raw)
    assert header == header._replace(
        base_offset=5, batch_length=len(raw) - 12, partition_leader_epoch=4, magic=2, attributes=0x12,
        last_offset_delta=2, base_timestamp=BASE_TIMESTAMP, max_timestamp=BASE_TIMESTAMP + 2, producer_id=9,
        producer_epoch=3, base_sequence=11, records_count=3)
    assert crc_ok(raw, 0, header)
    assert rows_of(decode_records(raw, 0, header)) == rows_of(sample_records())


def test_build_batch_without_records_needs_an_offset_range() -> None:
    with pytest.raises(ValueError):
        build_batch([])
    raw = build_batch([], last_offset_delta=4, base_timestamp=77, compression=4, producer_id=1,
                      producer_epoch=0, base_sequence=0)
    header = parse_header(raw)
    assert (header.batch_length, header.records_count, header.last_offset_delta) == (MIN_BATCH_LENGTH, 0, 4)
    assert (header.max_timestamp, header.compression) == (77, 0)
    assert crc_ok(raw, 0, header) and decode_records(raw, 0, header) == []


def test_build_batch_explicit_max_timestamp_and_delete_horizon() -> None:
    header = parse_header(build_batch(sample_records(), max_timestamp=9, has_delete_horizon=True))
    assert (header.max_timestamp, header.has_delete_horizon) == (9, True)


def test_decode_records_checks_the_frame() -> None:
    raw = build_batch(sample_records())
    header = parse_header(raw)
    with pytest.raises(RecordsError):
        decode_records(raw[:-1], 0, header)
    with pytest.raises(RecordsError):
        decode_records(raw, 0, header._replace(batch_length=10))
    assert len(decode_records(b"\x01\x02" + raw, 2, header)) == 3
    packed = build_batch(sample_records() * 100, compression=1)
    with pytest.raises(RecordsError) as info:
        decode_records(packed, 0, parse_header(packed), max_size=1000)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
def test_set_log_append_time_as_kafka(codec: int) -> None:
    raw = bytearray(b"\xaa" * 7 + build_batch(sample_records(), compression=codec, base_timestamp=BASE_TIMESTAMP,
                                              is_transactional=True, producer_id=1, producer_epoch=0,
                                              base_sequence=0))
    patch_attributes(raw, 7, parse_header(raw, 7).attributes | 0x0100)  # an unused bit from a client
    rewrite_crc(raw, 7)
    before = parse_header(raw, 7)
    body_before = bytes(raw[7 + HEADER_SIZE :])
    set_log_append_time(raw, 7, before, 99_999)
    after = parse_header(raw, 7)
    assert (after.timestamp_type, after.max_timestamp, after.compression, after.is_transactional) == (1, 99_999, codec, True)
    assert after.attributes == (before.attributes | 0x08) & 0xFF  # Kafka recomposes: unused bits clear
    assert after.base_timestamp == before.base_timestamp and bytes(raw[7 + HEADER_SIZE :]) == body_before
    assert crc_ok(raw, 7, after)
    theirs = DefaultRecordBatch(bytearray(raw[7:]))
    assert theirs.validate_crc()
    assert [r.timestamp for r in theirs] == [99_999] * 3  # readers take every timestamp from max_timestamp
    assert raw[:7] == b"\xaa" * 7 and raw[7 + ATTRIBUTES_OFFSET] == 0


headers_strategy = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=3)
record_strategy = st.builds(
    Record, offset_delta=st.just(0), timestamp_delta=st.integers(-(2**40), 2**40),
    key=st.none() | st.binary(max_size=20), value=st.none() | st.binary(max_size=60), headers=headers_strategy,
    attributes=st.integers(0, 255))


@settings(max_examples=80, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=12), st.sampled_from(CODECS), INT64, st.integers(0, 3))
def test_build_decode_round_trip(records: list[Record], codec: int, base_timestamp: int, gap: int) -> None:
    for index, record in enumerate(records):
        record.offset_delta = index * (gap + 1)
    base_timestamp = max(-(2**62), min(base_timestamp, 2**62))
    raw = build_batch(records, compression=codec, base_timestamp=base_timestamp)
    header = parse_header(raw)
    assert crc_ok(raw, 0, header)
    assert header.last_offset_delta == records[-1].offset_delta
    assert header.max_timestamp == base_timestamp + max(r.timestamp_delta for r in records)
    assert decode_records(raw, 0, header) == records


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.integers(-2, 6))
def test_random_record_bytes_only_raise_records_error(body: bytes, count: int) -> None:
    with contextlib.suppress(RecordsError):
        decode_body(body, count)
