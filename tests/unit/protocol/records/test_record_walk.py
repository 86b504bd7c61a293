"""The record walk: each lie a hostile batch can tell is refused with Kafka's code and a message that names it.

Batches are built here byte by byte (with a correct CRC unless a test says otherwise), so every lie
reaches the walk rather than the CRC check.
"""

from __future__ import annotations

import gzip
import os
import struct
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.compiled_modules import load_pure_walk
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records import batch as layout
from pybroker.protocol.records import record_walk, records_check
from pybroker.protocol.records.batch import RecordsError, attributes_for, parse_header, rewrite_crc
from pybroker.protocol.records.codecs import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress
from pybroker.protocol.records.record import Record, build_batch, encode_record
from pybroker.protocol.records.validate import TimestampRule, validate_produce_records
from pybroker.protocol.records.varint import write_varint

LIMIT = 8 << 20
NOW = 1_700_000_000_000
PURE = load_pure_walk()


def _records(n: int, *, deltas: list[int] | None = None, key: bytes | None = b"k",
             timestamp_deltas: list[int] | None = None) -> bytes:
    body = bytearray()
    for i in range(n):
        offset_delta = i if deltas is None else deltas[i]
        ts = i if timestamp_deltas is None else timestamp_deltas[i]
        encode_record(body, Record(offset_delta, ts, key, b"value-%d" % i, [("h", b"x")]))
    return bytes(body)


def _batch(body: bytes, records_count: int, last_offset_delta: int | None = None, *, codec: int = NONE,
           base_timestamp: int = NOW, max_timestamp: int | None = None, timestamp_type: int = 0,
           fix_crc: bool = True) -> bytearray:
    """A v2 batch around `body` (compressed here when `codec` says) with the header fields given."""
    payload = compress(codec, body) if codec else body
    lod = records_count - 1 if last_offset_delta is None else last_offset_delta
    out = bytearray(layout.HEADER_SIZE)
    layout.HEADER.pack_into(out, 0, 0, layout.HEADER_SIZE - layout.LOG_OVERHEAD + len(payload), -1, 2, 0,
                            attributes_for(codec, timestamp_type), lod, base_timestamp,
                            NOW + 10 if max_timestamp is None else max_timestamp, -1, -1, -1, records_count)
    out += payload
    if fix_crc:
        rewrite_crc(out, 0)
    return out


def _refused(raw: bytes | bytearray, **kw: object) -> RecordsError:
    args: dict[str, object] = {"max_batch_bytes": LIMIT, "allow_zstd": True} | kw
    with pytest.raises(RecordsError) as info:
        validate_produce_records(raw, **args)  # type: ignore[arg-type]
    return info.value


def _invalid(raw: bytes | bytearray, fragment: str) -> None:
    error = _refused(raw)
    assert error.error_code == ErrorCode.INVALID_RECORD, error.message
    assert fragment in error.message


# -- one test per lie ------------------------------------------------------------------------------

def test_a_good_batch_passes_and_says_what_it_holds() -> None:
    validated = validate_produce_records(_batch(_records(3), 3), max_batch_bytes=LIMIT, allow_zstd=True)
    assert (validated.record_count, validated.max_timestamp) == (3, NOW + 2)


def test_count_says_1_body_holds_3() -> None:
    _invalid(_batch(_records(3), 1), "records_count 1 but the batch holds 3 records")


def test_count_says_5_body_holds_1() -> None:
    _invalid(_batch(_records(1), 5), "records_count 5 but the batch holds 1 record")


def test_count_says_2_to_the_31_minus_1() -> None:
    _invalid(_batch(_records(3), 2**31 - 1), "records_count 2147483647 but the batch holds 3 records")


def test_last_offset_delta_that_disagrees_with_the_count() -> None:
    _invalid(_batch(_records(3), 3, last_offset_delta=5), "inconsistent batch offset range")


def test_last_offset_delta_that_disagrees_with_the_last_record() -> None:
    with pytest.raises(record_walk.MalformedRecords, match="last_offset_delta 5 but the last record"):
        record_walk.walk(_records(3), 0, len(_records(3)), 3, 5, True)


def test_offset_deltas_out_of_order() -> None:
    _invalid(_batch(_records(3, deltas=[0, 2, 1]), 3), "record 1 has offset delta 2, expected 1")


def test_record_length_overrun() -> None:
    body = bytearray(_records(2))
    body[0] += 2 * 20  # zigzag: the first record claims 20 more bytes
    _invalid(_batch(bytes(body), 2), "record 0 length")


def test_key_length_overrun() -> None:
    body = bytearray()
    encode_record(body, Record(0, 0, b"k", b"v"))
    body[4] = 2 * 50  # length, attributes, timestamp delta, offset delta, then the key length
    _invalid(_batch(bytes(body), 1), "record 0 key: length 50 overruns the record")


def test_header_count_lie() -> None:
    record = bytearray((0,))  # attributes
    for value in (0, 0, 1):  # timestamp delta, offset delta, key length
        write_varint(record, value)
    record += b"k"
    write_varint(record, -1)  # null value
    write_varint(record, 3)  # three headers, none present
    body = bytearray()
    write_varint(body, len(record))
    _invalid(_batch(bytes(body + record), 1), "record 0 header count: 3 is impossible")


def test_null_header_key() -> None:
    record = bytearray((0,))
    for value in (0, 0, -1, -1, 1, -1, -1):  # deltas, null key and value, one header: null key, null value
        write_varint(record, value)
    body = bytearray()
    write_varint(body, len(record))
    _invalid(_batch(bytes(body + record), 1), "record 0 header key: null")


def test_trailing_bytes() -> None:
    _invalid(_batch(_records(2) + b"\x00\x07", 2), "2 bytes after the last of 2 records")


def test_truncated_varint() -> None:
    body = bytearray()
    write_varint(body, 7)
    body += b"\x00\xff\xff\xff\xff\xff\xff\x80"  # attributes, then a timestamp delta that never ends
    _invalid(_batch(bytes(body), 1), "record 0 timestamp delta: truncated varint")


def test_varint_longer_than_five_bytes() -> None:
    body = b"\x80\x80\x80\x80\x80\x01" + bytes(20)
    _invalid(_batch(body, 1), "record 0 length: varint longer than 5 bytes")


def test_record_fields_shorter_than_the_length() -> None:
    body = bytearray(_records(1))
    body[0] += 2  # one byte more than the fields take...
    body.append(0)  # ...and that byte present: the record's length and its fields disagree
    _invalid(_batch(bytes(body), 1), "record 0 fields end 1 bytes before its length says")


def test_keys_on_compacted_topics_use_the_walk() -> None:
    error = _refused(_batch(_records(2, key=None), 2), require_keys=True)
    assert error.error_code == ErrorCode.INVALID_RECORD and "2 record errors in total" in error.message
    assert error.record_errors == ((0, "Compacted topic cannot accept message without key"),
                                   (1, "Compacted topic cannot accept message without key"))
    validate_produce_records(_batch(_records(2), 2), max_batch_bytes=LIMIT, allow_zstd=True, require_keys=True)


# -- compressed payloads ---------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_compressed_lies_are_found_inside(codec: int) -> None:
    _invalid(_batch(_records(3), 1, codec=codec), "records_count 1 but the batch holds 3 records")
    validate_produce_records(_batch(_records(3), 3, codec=codec), max_batch_bytes=LIMIT, allow_zstd=True)


def test_flagged_gzip_but_not_gzip() -> None:
    raw = _batch(_records(3), 3)
    struct.pack_into(">h", raw, layout.ATTRIBUTES_OFFSET, GZIP)
    rewrite_crc(raw, 0)
    error = _refused(raw)
    assert error.error_code == ErrorCode.CORRUPT_MESSAGE and "gzip" in error.message


def test_gzip_bomb_of_one_gib_is_refused_without_allocating_it() -> None:
    member = gzip.compress(bytes(1 << 20), compresslevel=9)  # 1 MiB of zeros, ~1 KiB compressed
    bomb = member * 1024  # concatenated members, read one after the other as Java reads them: 1 GiB
    raw = _batch(b"", 1, codec=NONE)
    struct.pack_into(">h", raw, layout.ATTRIBUTES_OFFSET, GZIP)
    raw = raw[: layout.HEADER_SIZE] + bomb
    struct.pack_into(">i", raw, layout.BATCH_LENGTH_OFFSET, len(raw) - layout.LOG_OVERHEAD)
    rewrite_crc(raw, 0)
    tracemalloc.start()
    try:
        error = _refused(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.error_code == ErrorCode.CORRUPT_MESSAGE
    assert f"more than {64 * 1024 * 1024} bytes" in error.message
    assert peak < 256 << 20  # the cap (64 MiB) and a copy, never the gigabyte


def test_single_member_gzip_bomb() -> None:
    squeezer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1 << 20)
    bomb = b"".join(squeezer.compress(chunk) for _ in range(80)) + squeezer.flush()  # 80 MiB
    error = _refused(_raw_with_payload(GZIP, bomb))
    assert error.error_code == ErrorCode.CORRUPT_MESSAGE and "more than" in error.message


def _raw_with_payload(codec: int, payload: bytes) -> bytearray:
    raw = bytearray(_batch(b"", 1))[: layout.HEADER_SIZE] + payload
    struct.pack_into(">h", raw, layout.ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">i", raw, layout.BATCH_LENGTH_OFFSET, len(raw) - layout.LOG_OVERHEAD)
    rewrite_crc(raw, 0)
    return raw


SIXTEEN_MIB = bytes(16 << 20)
BOMBS = {
    "zstd": (ZSTD, lambda: bytes(cramjam.zstd.compress(SIXTEEN_MIB))),
    "lz4": (LZ4, lambda: lz4.frame.compress(SIXTEEN_MIB, block_linked=False)),
    "snappy xerial": (SNAPPY, lambda: compress(SNAPPY, SIXTEEN_MIB)),
    "snappy raw": (SNAPPY, lambda: bytes(cramjam.snappy.compress_raw(SIXTEEN_MIB))),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_other_bombs_are_refused_naming_the_real_cap(name: str) -> None:
    codec, make = BOMBS[name]
    error = _refused(_raw_with_payload(codec, make()), max_decompressed=1 << 20)
    assert error.error_code == ErrorCode.CORRUPT_MESSAGE
    assert "more than 1048576 bytes" in error.message, error.message  # not "more than 0 bytes"


# -- timestamps ------------------------------------------------------------------------------------

RULE = TimestampRule(now_ms=NOW, before_max_ms=1000, after_max_ms=1000)


@pytest.mark.parametrize(("deltas", "ok"), [
    ([0, 500, -500], True),
    ([0, 1001, 0], False),  # one record too far in the future, though not the first
    ([0, 0, -1001], False),  # one too far in the past
])
def test_every_record_timestamp_is_checked(deltas: list[int], ok: bool) -> None:
    raw = _batch(_records(3, timestamp_deltas=deltas), 3)
    if ok:
        validated = validate_produce_records(raw, max_batch_bytes=LIMIT, allow_zstd=True, timestamps=RULE)
        assert validated.max_timestamp == NOW + max(deltas)
    else:
        error = _refused(raw, timestamps=RULE)
        assert error.error_code == ErrorCode.INVALID_TIMESTAMP and "out of range" in error.record_errors[0][1]


def test_max_timestamp_is_recomputed_from_the_records() -> None:
    raw = _batch(_records(3, timestamp_deltas=[5, 9, 1]), 3, max_timestamp=NOW + 999_999)
    validated = validate_produce_records(raw, max_batch_bytes=LIMIT, allow_zstd=True)
    assert validated.max_timestamp == NOW + 9


def test_log_append_time_from_a_producer() -> None:
    raw = _batch(_records(2), 2, timestamp_type=1, max_timestamp=NOW)
    lat_topic = TimestampRule(now_ms=NOW, before_max_ms=1000, after_max_ms=1000, log_append_time=True)
    assert _refused(raw, timestamps=lat_topic).error_code == ErrorCode.INVALID_TIMESTAMP
    assert validate_produce_records(raw, max_batch_bytes=LIMIT, allow_zstd=True, timestamps=RULE).max_timestamp == NOW
    no_time = _batch(_records(2), 2, timestamp_type=1, max_timestamp=-1)
    assert _refused(no_time, timestamps=RULE).error_code == ErrorCode.INVALID_TIMESTAMP


# -- compiled and pure Python agree ----------------------------------------------------------------

def test_the_compiled_walk_is_the_one_installed() -> None:
    assert PURE.COMPILED is False
    if os.environ.get("PYBROKER_PURE_PYTHON", "") in ("", "0"):
        assert records_check.COMPILED, records_check.WALK_IMPLEMENTATION


def _verdict(module: object, body: bytes, count: int, lod: int, consecutive: bool) -> object:
    try:
        summary = module.walk(body, 0, len(body), count, lod, consecutive)  # type: ignore[attr-defined]
    except ValueError as exc:
        return ("refused", str(exc))
    return (summary.count, summary.min_timestamp_delta, summary.max_timestamp_delta, summary.first_keyless)


records_strategy = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.binary(max_size=20),
                                      st.integers(-(2**40), 2**40),
                                      st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=3)),
                                               max_size=2)),
                            max_size=6)


@settings(max_examples=400, deadline=None)
@given(records_strategy, st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=3),
       st.integers(-1, 8), st.booleans())
def test_compiled_and_pure_give_the_same_verdicts(rows: list, edits: list[tuple[int, int]], count_shift: int,
                                                  consecutive: bool) -> None:
    body = bytearray()
    for i, (key, value, ts, headers) in enumerate(rows):
        encode_record(body, Record(i, ts, key, value, headers))
    for position, byte in edits:
        if body:
            body[position % len(body)] = byte
    count = max(len(rows) + count_shift - 1, 0) if count_shift >= 0 else len(rows)
    lod = max(count - 1, 0)
    raw = bytes(body)
    assert _verdict(record_walk, raw, count, lod, consecutive) == _verdict(PURE, raw, count, lod, consecutive)


def test_build_batch_output_always_walks() -> None:
    raw = build_batch([Record(i, i, b"k", b"v" * i) for i in range(50)], base_timestamp=NOW)
    summary = records_check.walk_batch(raw, 0, parse_header(raw), consecutive=True)
    assert (summary.count, summary.max_timestamp_delta, summary.all_keyed) == (50, 49, True)


# -- record errors (Produce v8+): every bad record named, as Kafka's LogValidator does ------------------

def _mixed_keys(n: int, keyless: set[int], timestamp_deltas: list[int] | None = None) -> bytes:
    body = bytearray()
    for i in range(n):
        ts = i if timestamp_deltas is None else timestamp_deltas[i]
        encode_record(body, Record(i, ts, None if i in keyless else b"k%d" % i, b"v"))
    return bytes(body)


@pytest.mark.parametrize("codec", [NONE, GZIP, ZSTD])
def test_every_keyless_record_of_a_compacted_batch_is_named(codec: int) -> None:
    keyless = {0, 10, 20, 90}
    error = _refused(_batch(_mixed_keys(100, keyless), 100, codec=codec), require_keys=True, partition_name="t-2")
    assert error.error_code == ErrorCode.INVALID_RECORD
    assert [index for index, _ in error.record_errors] == sorted(keyless)
    assert {message for _, message in error.record_errors} == \
        {"Compacted topic cannot accept message without key in topic partition t-2"}
    assert error.message.startswith("One or more records have been rejected due to 4 record errors in total, "
                                    "and only showing the first three errors at most: [RecordError(batchIndex=0, ")


def test_every_record_with_a_timestamp_out_of_range_is_named_and_a_missing_key_comes_first() -> None:
    raw = _batch(_mixed_keys(4, {3}, timestamp_deltas=[0, 5000, -5000, 9000]), 4)
    error = _refused(raw, timestamps=RULE, require_keys=True)
    assert error.error_code == ErrorCode.INVALID_TIMESTAMP
    assert error.message == "One or more records have been rejected due to invalid timestamp"
    assert [index for index, _ in error.record_errors] == [1, 2, 3]
    assert error.record_errors[0][1] == (f"Timestamp {NOW + 5000} of message with offset 1 is out of range. "
                                         f"The timestamp should be within [{NOW - 1000}, {NOW + 1000}]")
    assert "without key" in error.record_errors[2][1]


def test_a_minus_one_timestamp_among_real_ones_is_skipped_as_kafka_does() -> None:
    raw = _batch(_records(3, timestamp_deltas=[0, -1 - NOW, 10]), 3)
    validated = validate_produce_records(raw, max_batch_bytes=LIMIT, allow_zstd=True, timestamps=RULE)
    assert validated.max_timestamp == NOW + 10


def test_a_malformed_record_is_named_by_its_index() -> None:
    body = bytearray(_records(3))
    second = body[0] // 2 + 1  # record 0: a one-byte length, then that many bytes
    body[second + 1] = 1  # record 1's attributes
    error = _refused(_batch(bytes(body), 3))
    assert error.error_code == ErrorCode.INVALID_RECORD
    assert [index for index, _ in error.record_errors] == [1]
    assert "record 1 attributes 1" in error.record_errors[0][1]


def test_record_facts_agree_compiled_and_pure() -> None:
    body = _mixed_keys(50, {3, 7, 49}, timestamp_deltas=list(range(0, 500, 10)))
    expected = ([3, 7, 49], list(range(0, 500, 10)))
    assert record_walk.record_facts(body, 0, len(body), 50) == expected
    assert PURE.record_facts(body, 0, len(body), 50) == expected
