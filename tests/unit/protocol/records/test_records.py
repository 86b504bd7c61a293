"""Record batches: kafka-python as an independent oracle, validation codes, and hostile input."""

from __future__ import annotations

import contextlib
import gzip
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import (
    CRC_OFFSET,
    HEADER_SIZE,
    RecordsError,
    crc_ok,
    iter_batches,
    parse_header,
    patch_base_offset,
    patch_leader_epoch,
)
from pybroker.protocol.records.codecs import XERIAL_MAGIC, compress, decompress
from pybroker.protocol.records.record import Record, build_batch, decode_records, set_log_append_time
from pybroker.protocol.records.validate import validate_produce_records

CODECS = [0, 1, 2, 3, 4]
ROWS = [(b"k1", b"v1" * 50, [("h", b"x")]), (None, b"v2" * 50, []), (b"k3", None, [("a", None), ("b", b"")])]


def _theirs(codec: int, producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=producer[0], producer_epoch=producer[1],
                                        base_sequence=producer[2], batch_size=1 << 20)
    for i, (key, value, headers) in enumerate(ROWS):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_parse_and_decode(codec: int) -> None:
    raw = _theirs(codec, (7, 1, 0))
    header = parse_header(raw)
    assert (header.magic, header.compression, header.records_count, header.last_offset_delta) == (2, codec, 3, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    assert crc_ok(raw, 0, header)
    records = decode_records(raw, 0, header)
    got = [(r.key, r.value, [(k, v) for k, v in r.headers]) for r in records]
    assert got == [(k, v, [(hk, hv) for hk, hv in h]) for k, v, h in ROWS]
    assert [header.base_timestamp + r.timestamp_delta for r in records] == [1_700_000_000_000 + i for i in range(3)]
    assert validate_produce_records(raw, max_batch_bytes=1 << 20, allow_zstd=True).record_count == 3


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_by_kafka_python(codec: int) -> None:
    records = [Record(i, i, k, v, h) for i, (k, v, h) in enumerate(ROWS)]
    raw = build_batch(records, compression=codec, base_timestamp=1000, producer_id=3, producer_epoch=0,
                      base_sequence=5)
    theirs = DefaultRecordBatch(bytearray(raw))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.base_sequence) == (3, 5)
    got = [(r.key, r.value, [tuple(h) for h in r.headers], r.timestamp) for r in theirs]
    assert got == [(k, v, [(hk, hv) for hk, hv in h], 1000 + i) for i, (k, v, h) in enumerate(ROWS)]


def _valid(**kw: object) -> bytes:
    return build_batch([Record(0, 0, b"k", b"v"), Record(1, 1, b"k2", b"v2")], **kw)  # type: ignore[arg-type]


def _code(raw: bytes | bytearray, **kw: object) -> int:
    args: dict[str, object] = {"max_batch_bytes": 1 << 20, "allow_zstd": True} | kw
    with pytest.raises(RecordsError) as info:
        validate_produce_records(raw, **args)  # type: ignore[arg-type]
    return info.value.error_code


def test_validation_codes() -> None:
    good = _valid()
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    assert _code(flipped) == ErrorCode.CORRUPT_MESSAGE
    assert _code(good[:-3]) == ErrorCode.CORRUPT_MESSAGE
    assert _code(good[:40]) == ErrorCode.CORRUPT_MESSAGE
    assert _code(good + good) == ErrorCode.INVALID_RECORD
    assert _code(good + b"\x00") == ErrorCode.INVALID_RECORD
    assert _code(good, max_batch_bytes=len(good) - 1) == ErrorCode.MESSAGE_TOO_LARGE
    assert _code(_valid(compression=4), allow_zstd=False) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert _code(_valid(is_control=True)) == ErrorCode.INVALID_RECORD
    assert _code(_valid(producer_id=5, producer_epoch=0, base_sequence=-1)) == ErrorCode.INVALID_RECORD
    inconsistent = bytearray(good)
    struct.pack_into(">i", inconsistent, 57, 5)  # records_count
    struct.pack_into(">I", inconsistent, CRC_OFFSET, 0)
    from pybroker.protocol.records.batch import rewrite_crc

    rewrite_crc(inconsistent, 0)
    assert _code(inconsistent) == ErrorCode.INVALID_RECORD
    old_magic = bytearray(good)
    old_magic[16] = 1
    assert _code(old_magic) == ErrorCode.INVALID_RECORD
    keyless = build_batch([Record(0, 0, None, b"v")])
    assert _code(keyless, require_keys=True) == ErrorCode.INVALID_RECORD


def test_decompression_bomb_is_refused() -> None:
    bomb = gzip.compress(b"\x00" * (10 << 20))
    with pytest.raises(RecordsError) as info:
        decompress(1, bomb, 1 << 20)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    for codec in (2, 3, 4):
        with pytest.raises(RecordsError):
            decompress(codec, compress(codec, b"\x00" * (4 << 20)), 1 << 20)


def test_xerial_snappy() -> None:
    import cramjam

    block = bytes(cramjam.snappy.compress_raw(b"hello world" * 10))
    framed = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(2, framed, 1000) == b"hello world" * 10


def test_patching_keeps_crc_and_log_append_time_rewrites_it() -> None:
    raw = bytearray(_valid())
    patch_base_offset(raw, 0, 12345)
    patch_leader_epoch(raw, 0, 7)
    header = parse_header(raw)
    assert (header.base_offset, header.partition_leader_epoch) == (12345, 7)
    assert crc_ok(raw, 0, header)
    set_log_append_time(raw, 0, header, 99_999)
    header = parse_header(raw)
    assert header.timestamp_type == 1 and header.max_timestamp == 99_999
    assert crc_ok(raw, 0, header)
    assert DefaultRecordBatch(bytearray(raw)).validate_crc()


def test_iter_batches_stops_at_incomplete_tail() -> None:
    a, b = _valid(), _valid(base_offset=2)
    assert [p for p, _ in iter_batches(a + b + b[:30])] == [0, len(a)]
    assert list(iter_batches(b"\x00" * HEADER_SIZE)) == []


records_strategy = st.lists(
    st.builds(Record, offset_delta=st.just(0), timestamp_delta=st.integers(-1000, 1000),
              key=st.none() | st.binary(max_size=20), value=st.none() | st.binary(max_size=50),
              headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3)),
    min_size=1, max_size=10)


@settings(max_examples=60, deadline=None)
@given(records_strategy, st.sampled_from(CODECS))
def test_build_decode_round_trip(records: list[Record], codec: int) -> None:
    for i, r in enumerate(records):
        r.offset_delta = i
    raw = build_batch(records, compression=codec, base_timestamp=10_000)
    header = parse_header(raw)
    assert crc_ok(raw, 0, header)
    assert decode_records(raw, 0, header) == records
    validate_produce_records(raw, max_batch_bytes=1 << 20, allow_zstd=True)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_records_error(raw: bytes) -> None:
    with contextlib.suppress(RecordsError):
        validate_produce_records(raw, max_batch_bytes=1 << 20, allow_zstd=True, require_keys=True)
    if len(raw) >= HEADER_SIZE:
        with contextlib.suppress(RecordsError):
            decode_records(raw, 0, parse_header(raw))
