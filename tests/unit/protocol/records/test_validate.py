"""Produce-path validation: every refusal carries the code Kafka 4 answers with, in Kafka's order."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records import batch as layout
from pybroker.protocol.records.batch import RecordsError, rewrite_crc
from pybroker.protocol.records.record import Record, build_batch, encode_record
from pybroker.protocol.records.validate import validate_produce_records
from tests.unit.protocol.records.samples import BASE_TIMESTAMP, CODECS, sample_records

LIMIT = 1 << 20


def _good(**kw: object) -> bytes:
    return build_batch(sample_records(), base_timestamp=BASE_TIMESTAMP, **kw)  # type: ignore[arg-type]


GOOD = _good()
KEYED = build_batch([Record(0, 0, b"k", b"v"), Record(1, 1, b"k2", None)])


def _set(raw: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytes:
    """`raw` with one header field overwritten, its CRC recomputed unless asked not to."""
    out = bytearray(raw)
    struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        rewrite_crc(out, 0)
    return bytes(out)


def _code(raw: bytes | bytearray | memoryview, **kw: object) -> int:
    args: dict[str, object] = {"max_batch_bytes": LIMIT, "allow_zstd": True} | kw
    with pytest.raises(RecordsError) as info:
        validate_produce_records(raw, **args)  # type: ignore[arg-type]
    return info.value.error_code


def _malformed_records_with_valid_crc() -> bytes:
    """A batch whose header and CRC are fine but whose one record has a length that overruns it."""
    body = bytearray()
    encode_record(body, Record(0, 0, b"k", b"v"))
    body[0] += 2  # the record claims two bytes more than it has
    raw = bytearray(build_batch([Record(0, 0, b"k", b"v")]))
    raw[layout.HEADER_SIZE :] = body
    rewrite_crc(raw, 0)
    return bytes(raw)


FLIPPED = bytearray(GOOD)
FLIPPED[-1] ^= 0x40
SECOND = _good(base_offset=0)

# (case, records, extra arguments, code Kafka 4 answers with)
REFUSALS: list[tuple[str, bytes, dict[str, object], int]] = [
    ("empty", b"", {}, ErrorCode.INVALID_RECORD),
    ("shorter than a length field", GOOD[:11], {}, ErrorCode.INVALID_RECORD),
    ("length field below 14", _set(GOOD, 8, ">i", 13, fix_crc=False)[:20], {}, ErrorCode.CORRUPT_MESSAGE),
    ("negative length field", _set(GOOD, 8, ">i", -1, fix_crc=False), {}, ErrorCode.CORRUPT_MESSAGE),
    ("cut before the magic byte", GOOD[:16], {}, ErrorCode.INVALID_RECORD),
    ("magic 3", _set(GOOD, 16, ">b", 3, fix_crc=False), {}, ErrorCode.CORRUPT_MESSAGE),
    ("negative magic", _set(GOOD, 16, ">b", -1, fix_crc=False), {}, ErrorCode.CORRUPT_MESSAGE),
    ("truncated batch", GOOD[:-3], {}, ErrorCode.INVALID_RECORD),
    ("truncated header", GOOD[:30], {}, ErrorCode.INVALID_RECORD),
    ("length beyond the bytes", _set(GOOD, 8, ">i", len(GOOD), fix_crc=False), {}, ErrorCode.INVALID_RECORD),
    ("magic 1 message set", _set(GOOD, 16, ">b", 1, fix_crc=False), {}, ErrorCode.INVALID_RECORD),
    ("magic 0 message set", _set(GOOD, 16, ">b", 0, fix_crc=False), {}, ErrorCode.INVALID_RECORD),
    ("length shorter than a v2 header", _set(GOOD, 8, ">i", 20, fix_crc=False)[:32], {}, ErrorCode.CORRUPT_MESSAGE),
    ("two batches", GOOD + SECOND, {}, ErrorCode.INVALID_RECORD),
    ("a byte after the batch", GOOD + b"\x00", {}, ErrorCode.CORRUPT_MESSAGE),
    ("zeros after the batch", GOOD + bytes(20), {}, ErrorCode.CORRUPT_MESSAGE),
    ("half a batch after the batch", GOOD + SECOND[:40], {}, ErrorCode.CORRUPT_MESSAGE),
    ("bad magic after the batch", GOOD + _set(SECOND, 16, ">b", 9, fix_crc=False), {}, ErrorCode.CORRUPT_MESSAGE),
    ("base offset not 0", _good(base_offset=5), {}, ErrorCode.INVALID_RECORD),
    ("too large", GOOD, {"max_batch_bytes": len(GOOD) - 1}, ErrorCode.MESSAGE_TOO_LARGE),
    ("bit flip", bytes(FLIPPED), {}, ErrorCode.CORRUPT_MESSAGE),
    ("stale crc", _set(GOOD, 17, ">I", 0, fix_crc=False), {}, ErrorCode.CORRUPT_MESSAGE),
    ("zstd below produce v7", _good(compression=4), {"allow_zstd": False}, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ("zstd below v7 is found before the crc", _set(_good(compression=4), 17, ">I", 0, fix_crc=False),
     {"allow_zstd": False}, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ("codec 5", _set(GOOD, 21, ">h", 5), {}, ErrorCode.UNKNOWN_SERVER_ERROR),
    ("codec 7 below v7", _set(GOOD, 21, ">h", 7), {"allow_zstd": False}, ErrorCode.UNKNOWN_SERVER_ERROR),
    ("codec 6 with a bad crc", _set(GOOD, 21, ">h", 6, fix_crc=False), {}, ErrorCode.CORRUPT_MESSAGE),
    ("count above last delta + 1", _set(GOOD, 57, ">i", 5), {}, ErrorCode.INVALID_RECORD),
    ("count below last delta + 1", _set(GOOD, 57, ">i", 2), {}, ErrorCode.INVALID_RECORD),
    ("no records", _set(_set(GOOD, 57, ">i", 0), 23, ">i", -1), {}, ErrorCode.INVALID_RECORD),
    ("negative last offset delta", _set(GOOD, 23, ">i", -5), {}, ErrorCode.INVALID_RECORD),
    ("control batch", _good(is_control=True), {}, ErrorCode.INVALID_RECORD),
    ("producer id without sequence", _good(producer_id=5, producer_epoch=0), {}, ErrorCode.INVALID_RECORD),
    ("keyless record on a compacted topic", GOOD, {"require_keys": True}, ErrorCode.INVALID_RECORD),
    ("malformed records on a compacted topic", _malformed_records_with_valid_crc(), {"require_keys": True},
     ErrorCode.INVALID_RECORD),
    ("bomb on a compacted topic", build_batch([Record(0, 0, b"k", bytes(1 << 20))], compression=4),
     {"require_keys": True, "max_decompressed": 1 << 16}, ErrorCode.CORRUPT_MESSAGE),
]


@pytest.mark.parametrize(("raw", "kwargs", "code"), [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS])
def test_refusals_carry_kafkas_codes(raw: bytes, kwargs: dict[str, object], code: int) -> None:
    assert _code(raw, **kwargs) == code


@pytest.mark.parametrize("codec", CODECS)
def test_a_good_batch_is_described(codec: int) -> None:
    raw = build_batch(sample_records(), compression=codec, base_timestamp=BASE_TIMESTAMP, producer_id=3,
                      producer_epoch=2, base_sequence=17, is_transactional=True)
    result = validate_produce_records(raw, max_batch_bytes=len(raw), allow_zstd=True)
    assert [pos for pos, _ in result.batches] == [0]
    assert (result.record_count, result.size_bytes, result.max_timestamp) == (3, len(raw), BASE_TIMESTAMP + 2)
    assert (result.producer_id, result.producer_epoch, result.base_sequence, result.is_transactional) == (3, 2, 17, True)
    assert result.batches[0][1].compression == codec


def test_accepted_inputs() -> None:
    for raw in (bytearray(KEYED), memoryview(KEYED), KEYED):
        assert validate_produce_records(raw, max_batch_bytes=LIMIT, allow_zstd=False, require_keys=True).record_count == 2
    assert validate_produce_records(GOOD, max_batch_bytes=LIMIT, allow_zstd=False).record_count == 3
    leader_epoch_set = _set(GOOD, 12, ">i", 99, fix_crc=False)  # clients' epoch is ignored (broker overwrites it)
    assert validate_produce_records(leader_epoch_set, max_batch_bytes=LIMIT, allow_zstd=True).record_count == 3
    odd_producer = _good(producer_id=-5)  # Kafka only treats ids above -1 as producer ids
    assert validate_produce_records(odd_producer, max_batch_bytes=LIMIT, allow_zstd=True).producer_id == -5


def test_records_are_walked_even_when_keys_are_not_needed() -> None:
    """A CRC-valid batch with a malformed record is refused on every topic, as Kafka's record iterator does."""
    raw = _malformed_records_with_valid_crc()
    assert _code(raw) == ErrorCode.INVALID_RECORD
    assert _code(raw, require_keys=True) == ErrorCode.INVALID_RECORD


@settings(max_examples=200, deadline=None)
@given(st.integers(layout.MAGIC_OFFSET + 1, len(GOOD) - 1), st.integers(0, 7))
def test_any_bit_flip_in_the_crc_range_is_corrupt(position: int, bit: int) -> None:
    flipped = bytearray(GOOD)
    flipped[position] ^= 1 << bit
    assert _code(flipped) == ErrorCode.CORRUPT_MESSAGE


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_records_error(raw: bytes) -> None:
    for allow_zstd in (False, True):
        with contextlib.suppress(RecordsError):
            validate_produce_records(raw, max_batch_bytes=LIMIT, allow_zstd=allow_zstd, require_keys=True)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CODECS), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=4),
       st.integers(0, 400), st.binary(max_size=30), st.booleans())
def test_mutated_batches_only_raise_records_error(codec: int, writes: list[tuple[int, int]], cut: int,
                                                   tail: bytes, fix_crc: bool) -> None:
    raw = bytearray(build_batch(sample_records(), compression=codec, base_timestamp=BASE_TIMESTAMP))
    for position, value in writes:
        if position < len(raw):
            raw[position] = value
    if fix_crc:
        with contextlib.suppress(RecordsError):
            rewrite_crc(raw, 0)
    raw = raw[: len(raw) - cut % 8] + tail if cut % 3 == 0 else raw
    with contextlib.suppress(RecordsError):
        validate_produce_records(raw, max_batch_bytes=LIMIT, allow_zstd=True, require_keys=True,
                                 max_decompressed=1 << 16)
