"""Compression codecs of record batches, always decompressed with an output cap.

Codec ids are Kafka's: 0 none, 1 gzip, 2 snappy, 3 lz4 (frame format), 4 zstd. Snappy comes in two
shapes: raw blocks (librdkafka, kafka-python) and the xerial framing the Java client writes
(magic `\\x82SNAPPY\\x00`, version, compat, then length-prefixed raw blocks); both are read.
Every decompression stops at `max_size` bytes of output, so a small hostile batch cannot expand into
gigabytes (a decompression bomb answers CORRUPT_MESSAGE).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from struct import Struct
from typing import Any

import cramjam
import lz4.frame
import zstandard

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import RecordsError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic (8), version (4), compatible version (4)
_INT32 = Struct(">i")
_CHUNK = 64 * 1024


def _too_big(max_size: int) -> RecordsError:
    return RecordsError(ErrorCode.CORRUPT_MESSAGE, f"records decompress to more than {max_size} bytes")


def _gunzip(data: Any, max_size: int) -> bytes:
    inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
    out = inflater.decompress(bytes(data), max_size + 1)
    if len(out) > max_size:
        raise _too_big(max_size)
    if not inflater.eof:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "truncated gzip stream")
    return out


def _snappy_block(data: Any, max_size: int) -> bytes:
    length = int(cramjam.snappy.decompress_raw_len(bytes(data)))
    if length > max_size:
        raise _too_big(max_size)
    return bytes(cramjam.snappy.decompress_raw(bytes(data)))


def _unsnappy(data: Any, max_size: int) -> bytes:
    raw = bytes(data)
    if not raw.startswith(XERIAL_MAGIC):
        return _snappy_block(raw, max_size)
    out = bytearray()
    pos = _XERIAL_HEADER
    while pos < len(raw):
        if len(raw) - pos < 4:
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(raw, pos)
        pos += 4
        if size < 0 or size > len(raw) - pos:
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "bad xerial snappy block length")
        out += _snappy_block(raw[pos : pos + size], max_size - len(out))
        pos += size
    return bytes(out)


def _unlz4(data: Any, max_size: int) -> bytes:
    inflater = lz4.frame.LZ4FrameDecompressor()
    out = inflater.decompress(bytes(data), max_length=max_size + 1)
    if len(out) > max_size:
        raise _too_big(max_size)
    if not inflater.eof:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "truncated lz4 frame")
    return bytes(out)


def _unzstd(data: Any, max_size: int) -> bytes:
    reader = zstandard.ZstdDecompressor().decompressobj()
    out = bytearray()
    raw = bytes(data)
    for start in range(0, len(raw), _CHUNK):
        out += reader.decompress(raw[start : start + _CHUNK])
        if len(out) > max_size:
            raise _too_big(max_size)
    return bytes(out)


_DECOMPRESSORS: dict[int, Callable[[Any, int], bytes]] = {
    NONE: lambda data, max_size: bytes(data),
    GZIP: _gunzip,
    SNAPPY: _unsnappy,
    LZ4: _unlz4,
    ZSTD: _unzstd,
}

_COMPRESSORS: dict[int, Callable[[bytes], bytes]] = {
    NONE: bytes,
    GZIP: lambda data: bytes(cramjam.gzip.compress(data)),
    SNAPPY: lambda data: bytes(cramjam.snappy.compress_raw(data)),
    LZ4: lambda data: lz4.frame.compress(data),
    ZSTD: lambda data: zstandard.ZstdCompressor().compress(data),
}


def decompress(codec: int, data: Any, max_size: int) -> bytes:
    fn = _DECOMPRESSORS.get(codec)
    if fn is None:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {codec}")
    try:
        return fn(data, max_size)
    except RecordsError:
        raise
    except Exception as exc:  # each library has its own error types; all mean the same to a client
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"{CODEC_NAMES[codec]} data is corrupt: {exc}") from None


def compress(codec: int, data: bytes) -> bytes:
    fn = _COMPRESSORS.get(codec)
    if fn is None:
        raise ValueError(f"unknown compression codec {codec}")
    return fn(data)
