"""Codecs: round trips, the shapes other clients write, and the output cap against bombs."""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import RecordsError
from pybroker.protocol.records.codecs import GZIP, LZ4, NONE, SNAPPY, XERIAL_MAGIC, ZSTD, compress, decompress
from tests.unit.protocol.records.samples import CODECS

TEXT = b"The quick brown fox jumps over the lazy dog. " * 2000  # ~90 KB: several xerial blocks


def _code(codec: int, data: bytes, max_size: int = 1 << 20) -> int:
    with pytest.raises(RecordsError) as info:
        decompress(codec, data, max_size)
    return info.value.error_code


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=3000))
def test_round_trip(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data), len(data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_the_cap_is_exact(codec: int) -> None:
    packed = compress(codec, TEXT)
    assert decompress(codec, packed, len(TEXT)) == TEXT
    assert decompress(codec, memoryview(packed), len(TEXT)) == TEXT
    assert _code(codec, packed, len(TEXT) - 1) == ErrorCode.CORRUPT_MESSAGE


# what kafka-python writes (xerial snappy by default, lz4 frames with independent blocks)
KAFKA_PYTHON_ENCODERS = {
    GZIP: kafka_codec.gzip_encode,
    SNAPPY: kafka_codec.snappy_encode,
    LZ4: kafka_codec.lz4_encode,
    ZSTD: kafka_codec.zstd_encode,
}
KAFKA_PYTHON_DECODERS = {
    GZIP: kafka_codec.gzip_decode,
    SNAPPY: kafka_codec.snappy_decode,
    LZ4: kafka_codec.lz4_decode,
    ZSTD: kafka_codec.zstd_decode,
}


@pytest.mark.parametrize("codec", sorted(KAFKA_PYTHON_ENCODERS))
def test_kafka_python_codecs_both_ways(codec: int) -> None:
    assert decompress(codec, KAFKA_PYTHON_ENCODERS[codec](TEXT), len(TEXT)) == TEXT
    assert KAFKA_PYTHON_DECODERS[codec](compress(codec, TEXT)) == TEXT


def test_snappy_raw_and_xerial_framed() -> None:
    raw_block = bytes(cramjam.snappy.compress_raw(TEXT))  # librdkafka's shape
    assert decompress(SNAPPY, raw_block, len(TEXT)) == TEXT
    assert decompress(SNAPPY, kafka_codec.snappy_encode(TEXT, xerial_compatible=False), len(TEXT)) == TEXT
    framed = kafka_codec.snappy_encode(TEXT, xerial_compatible=True, xerial_blocksize=1000)
    assert framed.startswith(XERIAL_MAGIC)
    assert decompress(SNAPPY, framed, len(TEXT)) == TEXT
    ours = compress(SNAPPY, TEXT)  # written as Kafka's Java client writes it: xerial, 32 KiB blocks
    assert ours[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    assert decompress(SNAPPY, XERIAL_MAGIC + struct.pack(">ii", 1, 1), 10) == b""


def test_bad_xerial_framing() -> None:
    block = bytes(cramjam.snappy.compress_raw(b"hello"))
    head = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    assert _code(SNAPPY, XERIAL_MAGIC + b"\x00") == ErrorCode.CORRUPT_MESSAGE
    assert _code(SNAPPY, head + b"\x00\x00") == ErrorCode.CORRUPT_MESSAGE
    assert _code(SNAPPY, head + struct.pack(">i", len(block) + 1) + block) == ErrorCode.CORRUPT_MESSAGE
    assert _code(SNAPPY, head + struct.pack(">i", -1) + block) == ErrorCode.CORRUPT_MESSAGE
    bomb_block = bytes(cramjam.snappy.compress_raw(b"\x00" * 4000))
    assert _code(SNAPPY, head + (struct.pack(">i", len(bomb_block)) + bomb_block) * 3, 10_000) \
        == ErrorCode.CORRUPT_MESSAGE


def test_lz4_blocks_are_independent() -> None:
    """Kafka's Java reader refuses frames with linked blocks: FLG bit 5 must be set."""
    frame = compress(LZ4, TEXT)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] & 0x20


def test_concatenated_gzip_members_and_zstd_frames() -> None:
    assert decompress(GZIP, gzip.compress(b"ab") + gzip.compress(b"cd"), 10) == b"abcd"
    assert decompress(GZIP, gzip.compress(b"ab") + b"trailing junk", 10) == b"ab"
    assert decompress(ZSTD, compress(ZSTD, b"ab") + compress(ZSTD, b"cd"), 10) == b"abcd"
    streamed = zstandard.ZstdCompressor().compressobj()  # no content size in the frame, as zstd-jni streams
    frame = streamed.compress(TEXT) + streamed.flush()
    assert decompress(ZSTD, frame, len(TEXT)) == TEXT


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_corrupt_and_truncated_payloads(codec: int) -> None:
    packed = compress(codec, TEXT)
    assert _code(codec, packed[: len(packed) // 2]) == ErrorCode.CORRUPT_MESSAGE
    assert _code(codec, b"\x00" * 32) == ErrorCode.CORRUPT_MESSAGE
    assert _code(codec, b"") == ErrorCode.CORRUPT_MESSAGE


def test_unknown_codec() -> None:
    assert _code(5, b"x") == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(ValueError):
        compress(7, b"x")
    assert decompress(NONE, b"abc", 3) == b"abc"
    assert _code(NONE, b"abcd", 3) == ErrorCode.CORRUPT_MESSAGE


BOMBS = {
    GZIP: lambda size: gzip.compress(b"\x00" * size),
    SNAPPY: lambda size: compress(SNAPPY, b"\x00" * size),
    LZ4: lambda size: lz4.frame.compress(b"\x00" * size),
    ZSTD: lambda size: zstandard.ZstdCompressor().compress(b"\x00" * size),
}


@pytest.mark.parametrize("codec", sorted(BOMBS))
def test_bombs_stop_at_the_cap_without_inflating(codec: int) -> None:
    bomb = BOMBS[codec](64 << 20)
    assert len(bomb) < 4 << 20
    tracemalloc.start()
    try:
        assert _code(codec, bomb, 1 << 20) == ErrorCode.CORRUPT_MESSAGE
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(bomb) + (8 << 20)  # a few MiB, never the 64 MiB the bomb holds
