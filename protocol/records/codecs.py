"""Compression codecs of record batches, always decompressed under an output cap.

Codec ids are Kafka's: 0 none, 1 gzip, 2 snappy, 3 lz4 (frame format), 4 zstd.

Reading is as lenient as Kafka's clients are: gzip may hold several members; snappy comes as one raw
block (librdkafka) or xerial-framed (`\\x82SNAPPY\\x00`, version, compatible version, then
length-prefixed raw blocks: the Java client and kafka-python); zstd may hold several frames.
Every decompression stops once `max_size` bytes of output are exceeded, so a small hostile batch
cannot expand into gigabytes: a decompression bomb, like any undecodable payload, is CORRUPT_MESSAGE.
`decompress_prefix` gives the first bytes of a payload that passed a cap, so that its first records can
be read as Kafka reads them (one after the other, as they inflate): most bombs are refused there, for
their first record, before anything more is inflated.

Writing follows what Kafka's own Java code writes, so that every client can read what we compress
(the cleaner recompresses batches): xerial-framed snappy in 32 KiB blocks, and lz4 frames with
independent blocks (Kafka's Java reader refuses linked blocks).
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable
from struct import Struct

import cramjam
import lz4.frame

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import Buffer, RecordsError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = Struct(">8sii")  # magic, version, compatible version
_XERIAL_VERSION = 1
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_INT32 = Struct(">i")
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_ONLY = 16 + zlib.MAX_WBITS  # a gzip header is required, as Java's GZIPInputStream requires it
_ZSTD_FIRST_GUESS = 64 * 1024
_ZSTD_LEVEL = 3  # zstd's own default, as Kafka's


def _corrupt(message: str) -> RecordsError:
    return RecordsError(ErrorCode.CORRUPT_MESSAGE, message)


def _too_big(max_size: int) -> RecordsError:
    return _corrupt(f"records decompress to more than {max_size} bytes")


def passed_cap(exc: RecordsError, max_size: int) -> bool:
    """Whether `decompress` refused a payload because it would pass `max_size` (for zstd: maybe so,
    the library cannot tell a corrupt frame from a buffer too small). A caller that tried a small cap
    first tries again under a bigger one only then."""
    return exc.error_code == ErrorCode.CORRUPT_MESSAGE and f"more than {max_size} bytes" in exc.message


def _identity(data: Buffer, max_size: int) -> bytes:
    if len(data) > max_size:
        raise _too_big(max_size)
    return bytes(data)


def _gunzip(data: Buffer, max_size: int) -> bytes:
    """Every gzip member in turn (Java reads concatenated members); anything else after one is ignored."""
    out = bytearray()
    pending = bytes(data)
    while True:
        inflater = zlib.decompressobj(wbits=_GZIP_ONLY)
        out += inflater.decompress(pending, max_size + 1 - len(out))
        if len(out) > max_size:
            raise _too_big(max_size)
        if not inflater.eof:
            raise _corrupt("truncated gzip stream")
        pending = inflater.unused_data
        if not pending.startswith(_GZIP_MAGIC):
            return bytes(out)


def _snappy_block(block: bytes, room: int, max_size: int) -> bytes:
    """One raw snappy block, its declared length checked against the `room` left under the cap
    (`max_size`, which the refusal names) before anything is allocated."""
    if int(cramjam.snappy.decompress_raw_len(block)) > room:
        raise _too_big(max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


def _unsnappy(data: Buffer, max_size: int) -> bytes:
    raw = bytes(data)
    if not raw.startswith(XERIAL_MAGIC):
        return _snappy_block(raw, max_size, max_size)
    if len(raw) < _XERIAL_HEADER.size:
        raise _corrupt("truncated xerial snappy header")
    out = bytearray()
    pos = _XERIAL_HEADER.size
    while pos < len(raw):
        if len(raw) - pos < _INT32.size:
            raise _corrupt("truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(raw, pos)
        pos += _INT32.size
        if size < 0 or size > len(raw) - pos:
            raise _corrupt("xerial snappy block length overruns the data")
        out += _snappy_block(raw[pos : pos + size], max_size - len(out), max_size)
        pos += size
    return bytes(out)


def _unlz4(data: Buffer, max_size: int) -> bytes:
    """The first lz4 frame (as Kafka's reader: bytes after its end mark are ignored)."""
    inflater = lz4.frame.LZ4FrameDecompressor()
    out = inflater.decompress(bytes(data), max_length=max_size + 1)
    if len(out) > max_size:
        raise _too_big(max_size)
    if not inflater.eof:
        raise _corrupt("truncated lz4 frame")
    return bytes(out)


def _unzstd(data: Buffer, max_size: int) -> bytes:
    """Decode into a bounded buffer, growing it (up to the cap) while the output does not fit.

    A zstd frame need not declare its size and a few bytes can expand to megabytes, so the output
    buffer, never the input, is what bounds the work. A failure below the cap may only mean the
    buffer was small: retry bigger rather than trust the library's wording.
    """
    raw = bytes(data)
    limit = max_size + 1
    capacity = min(limit, max(_ZSTD_FIRST_GUESS, 4 * len(raw)))
    while True:
        out = bytearray(capacity)
        try:
            written = int(cramjam.zstd.decompress_into(raw, out))
        except cramjam.DecompressionError as exc:
            if capacity < limit:
                capacity = min(limit, capacity * 4)
                continue
            raise _corrupt(f"zstd data is corrupt or decompresses to more than {max_size} bytes: {exc}") from None
        if written > max_size:
            raise _too_big(max_size)
        return bytes(out[:written])


def _gunzip_prefix(data: Buffer, size: int) -> bytes:
    out = bytearray()
    pending = bytes(data)
    while len(out) < size:
        inflater = zlib.decompressobj(wbits=_GZIP_ONLY)
        out += inflater.decompress(pending, size - len(out))
        pending = inflater.unused_data
        if not inflater.eof or not pending.startswith(_GZIP_MAGIC):
            break
    return bytes(out)


def _unsnappy_prefix(data: Buffer, size: int) -> bytes:
    """The xerial blocks that fit in `size`; nothing of one raw block (it inflates whole or not at all)."""
    raw = bytes(data)
    out = bytearray()
    pos = _XERIAL_HEADER.size
    if not raw.startswith(XERIAL_MAGIC):
        return b""
    while len(out) < size and len(raw) - pos >= _INT32.size:
        (length,) = _INT32.unpack_from(raw, pos)
        pos += _INT32.size
        block = raw[pos : pos + max(0, length)]
        if int(cramjam.snappy.decompress_raw_len(block)) > size - len(out):
            break
        out += bytes(cramjam.snappy.decompress_raw(block))
        pos += length
    return bytes(out[:size])


def _unlz4_prefix(data: Buffer, size: int) -> bytes:
    return bytes(lz4.frame.LZ4FrameDecompressor().decompress(bytes(data), max_length=size))


def _unzstd_prefix(data: Buffer, size: int) -> bytes:
    """cramjam fills the buffer before it reports that the output does not fit (a corrupt frame leaves
    the rest zeros: that prefix is refused for its records rather than as corrupt, refused either way)."""
    out = bytearray(size)
    with contextlib.suppress(cramjam.DecompressionError):
        return bytes(out[: int(cramjam.zstd.decompress_into(bytes(data), out))])
    return bytes(out)


def _xerial_snappy(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION))
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


_DECOMPRESSORS: dict[int, Callable[[Buffer, int], bytes]] = {
    NONE: _identity,
    GZIP: _gunzip,
    SNAPPY: _unsnappy,
    LZ4: _unlz4,
    ZSTD: _unzstd,
}

_PREFIXES: dict[int, Callable[[Buffer, int], bytes]] = {
    NONE: lambda data, size: bytes(data[:size]),
    GZIP: _gunzip_prefix,
    SNAPPY: _unsnappy_prefix,
    LZ4: _unlz4_prefix,
    ZSTD: _unzstd_prefix,
}

_COMPRESSORS: dict[int, Callable[[bytes], bytes]] = {
    NONE: bytes,
    GZIP: lambda data: bytes(cramjam.gzip.compress(data)),
    SNAPPY: _xerial_snappy,
    LZ4: lambda data: lz4.frame.compress(data, block_linked=False),
    ZSTD: lambda data: bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL)),
}


def decompress(codec: int, data: Buffer, max_size: int) -> bytes:
    """The decompressed payload; RecordsError(CORRUPT_MESSAGE) when unreadable or above `max_size`."""
    fn = _DECOMPRESSORS.get(codec)
    if fn is None:
        raise _corrupt(f"unknown compression codec {codec}")
    try:
        return fn(data, max_size)
    except RecordsError:
        raise
    except Exception as exc:  # each library has its own error types; all mean the same to a client
        raise _corrupt(f"{CODEC_NAMES[codec]} data is corrupt: {exc}") from None


def decompress_prefix(codec: int, data: Buffer, size: int) -> bytes:
    """At most the first `size` bytes of the decompressed payload (fewer where the codec cannot stop
    inside a block); for a payload `decompress` refused for passing the cap `size`. RecordsError
    (CORRUPT_MESSAGE) when even that much does not decompress."""
    fn = _PREFIXES.get(codec)
    if fn is None:
        raise _corrupt(f"unknown compression codec {codec}")
    try:
        return fn(data, size)
    except Exception as exc:  # each library has its own error types; all mean the same to a client
        raise _corrupt(f"{CODEC_NAMES[codec]} data is corrupt: {exc}") from None


def compress(codec: int, data: bytes) -> bytes:
    """The payload compressed as Kafka's Java client would write it (ValueError for an unknown codec)."""
    fn = _COMPRESSORS.get(codec)
    if fn is None:
        raise ValueError(f"unknown compression codec {codec}")
    return fn(bytes(data))
