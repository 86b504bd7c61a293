"""A payload's first bytes (`codecs.decompress_prefix`) and the verdict its first records give
(`records_check.prefix_refusal`): how a batch that inflates past a validation thread's budget is judged
as Kafka reads records, one after the other, before anything more is inflated.

The hypothesis tests are the fuzz target of both: any bytes under any codec give at most `size` bytes or
CORRUPT_MESSAGE, never another exception, and any prefix of a valid batch gives no verdict.
"""

from __future__ import annotations

import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    RecordsError,
    parse_header,
    rewrite_crc,
)
from pybroker.protocol.records.codecs import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    compress,
    decompress_prefix,
)
from pybroker.protocol.records.record import Record, build_batch
from pybroker.protocol.records.records_check import prefix_refusal
from tests.unit.protocol.records.samples import CODECS

TEXT = b"The quick brown fox jumps over the lazy dog. " * 4000  # ~180 KB: several xerial blocks
COMPRESSED = (GZIP, SNAPPY, LZ4, ZSTD)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [1, 1000, 65_536, 100_000])
def test_a_prefix_is_the_start_of_the_payload(codec: int, size: int) -> None:
    prefix = decompress_prefix(codec, compress(codec, TEXT), size)
    assert len(prefix) <= size and TEXT.startswith(prefix)
    if codec != SNAPPY:  # snappy stops at a block's end (32 KiB blocks as Java writes them)
        assert prefix == TEXT[:size]
    else:
        assert len(prefix) > size - (32 << 10)


def test_one_raw_snappy_block_gives_no_prefix_unless_it_fits() -> None:
    raw = bytes(cramjam.snappy.compress_raw(TEXT))
    assert decompress_prefix(SNAPPY, raw, 1000) == b""  # it inflates whole or not at all
    assert decompress_prefix(SNAPPY, XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(raw)) + raw, len(TEXT)) == TEXT


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=2000), st.integers(0, 5000))
def test_any_bytes_give_a_short_prefix_or_corrupt_message(codec: int, data: bytes, size: int) -> None:
    try:
        assert len(decompress_prefix(codec, data, size)) <= size
    except RecordsError as exc:
        assert exc.error_code == ErrorCode.CORRUPT_MESSAGE


def _batch(records: bytes, count: int, codec: int) -> bytes:
    """A batch header (count records, matching last offset delta) around compressed `records`."""
    batch = bytearray(build_batch([Record(i, 0, b"k", b"v") for i in range(count)], base_timestamp=0))
    del batch[RECORDS_OFFSET:]
    batch += compress(codec, records)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">i", batch, BATCH_LENGTH_OFFSET, len(batch) - LOG_OVERHEAD)
    rewrite_crc(batch, 0)
    return bytes(batch)


def _records(count: int, value_size: int) -> bytes:
    batch = build_batch([Record(i, 0, b"key-%d" % i, bytes(value_size)) for i in range(count)], base_timestamp=0)
    return batch[HEADER_SIZE:]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(COMPRESSED), st.integers(1, 300), st.integers(0, 3000), st.integers(1, 200_000))
def test_no_prefix_of_a_valid_batch_is_refused(codec: int, count: int, value_size: int, size: int) -> None:
    batch = _batch(_records(count, value_size), count, codec)
    assert prefix_refusal(batch, 0, parse_header(batch), size) is None


@pytest.mark.parametrize("codec", COMPRESSED)
def test_zeros_are_refused_for_their_first_record(codec: int) -> None:
    batch = _batch(bytes(1 << 20), 1, codec)
    refusal = prefix_refusal(batch, 0, parse_header(batch), 64 << 10)
    assert refusal is not None and refusal.error_code == ErrorCode.INVALID_RECORD
    assert "record 0 length 0" in refusal.message and refusal.record_errors[0][0] == 0


def test_a_bad_record_after_good_ones_is_refused_and_one_cut_short_is_not() -> None:
    good = _records(50, 100)
    bad = good + b"\x00" * 1000  # a record of length 0 after the 50 good ones
    batch = _batch(bad, 60, GZIP)
    refusal = prefix_refusal(batch, 0, parse_header(batch), len(good) + 10)
    assert refusal is not None and refusal.record_errors[0][0] == 50
    assert prefix_refusal(batch, 0, parse_header(batch), len(good) - 10) is None  # record 49 is cut: no verdict
    assert prefix_refusal(batch, 0, parse_header(batch), len(good)) is None  # fewer records than the count


def test_an_uncompressed_batch_prefix_is_its_records() -> None:
    batch = _batch(_records(3, 10), 3, NONE)
    assert prefix_refusal(batch, 0, parse_header(batch), 1 << 20) is None
