"""Decompression bombs of each codec, for the hostile-records tests and `bench/bombs.py`.

A bomb is one batch (a valid header and CRC-32C, so only its payload lies) whose compressed payload of
zeros inflates far past the broker's decompression cap (64 MiB) where the codec allows it: gzip and zstd
1 GiB, lz4 about 250 MB (lz4 inflates at most about 255 times). Snappy cannot inflate much more than 21
times, so its bomb (1 MB of xerial blocks) inflates to about 21 MB: past what a validation thread may
inflate, under the cap. Zeros are no record: a reader that gets that far finds a record of length 0.
Each payload is built chunk by chunk and cached, so a test never holds the gigabyte.
"""

from __future__ import annotations

import functools
import struct
import time
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame

from pybroker.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    rewrite_crc,
)
from pybroker.protocol.records.codecs import GZIP, LZ4, SNAPPY, XERIAL_MAGIC, ZSTD
from pybroker.protocol.records.record import Record, build_batch

MIB = 1 << 20
#: what the gzip and zstd bombs would inflate to with no cap
INFLATED = 1 << 30


def _zeros_gzip() -> bytes:
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    chunk = bytes(MIB)
    return b"".join(deflater.compress(chunk) for _ in range(INFLATED // MIB)) + deflater.flush()


def _zeros_zstd() -> bytes:
    compressor = cramjam.zstd.Compressor(level=3)
    chunk = bytes(MIB)
    for _ in range(INFLATED // MIB):
        compressor.compress(chunk)
    return bytes(compressor.finish())


def _zeros_lz4() -> bytes:
    return bytes(lz4.frame.compress(bytes(250 * MIB), block_linked=False, compression_level=12))


def _zeros_snappy() -> bytes:
    block = bytes(cramjam.snappy.compress_raw(bytes(32 << 10)))
    out = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    while len(out) < MIB:
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


#: codec name -> (codec id, the payload of zeros it carries)
PAYLOADS: dict[str, tuple[int, Callable[[], bytes]]] = {
    "gzip": (GZIP, _zeros_gzip),
    "snappy": (SNAPPY, _zeros_snappy),
    "lz4": (LZ4, _zeros_lz4),
    "zstd": (ZSTD, _zeros_zstd),
}
#: the codecs whose bomb inflates past the 64 MiB cap (snappy's stops near 21 MB)
PAST_THE_CAP = ("gzip", "lz4", "zstd")


def flagged_batch(records: bytes, codec: int, count: int = 1) -> bytes:
    """`records` (compressed with `codec`) behind the header of a batch of `count` records, flagged, with a
    valid CRC."""
    batch = bytearray(build_batch([Record(i, 0, b"k", b"v") for i in range(count)],
                                  base_timestamp=int(time.time() * 1000)))
    del batch[RECORDS_OFFSET:]
    batch += records
    (attributes,) = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, attributes | codec)
    struct.pack_into(">i", batch, BATCH_LENGTH_OFFSET, len(batch) - LOG_OVERHEAD)
    rewrite_crc(batch, 0)
    return bytes(batch)


@functools.cache
def bomb(codec: str) -> bytes:
    """The bomb of `codec` ("gzip", "snappy", "lz4", "zstd")."""
    codec_id, payload = PAYLOADS[codec]
    return flagged_batch(payload(), codec_id)
