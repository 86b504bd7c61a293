"""The RecordBatch v2 header: one precompiled Struct, named offsets, and in-place patching.

Records stay opaque on the hot path: the broker reads this 61-byte header, checks the CRC-32C over
attributes..end, and patches `base_offset` and `partition_leader_epoch` (both outside the CRC) in place.

Layout (big-endian), offsets from the start of the batch:
     0  base_offset             int64
     8  batch_length            int32   bytes after this field
    12  partition_leader_epoch  int32
    16  magic                   int8    always 2 here
    17  crc                     uint32  CRC-32C of everything from `attributes` to the end
    21  attributes              int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                        6 delete horizon set
    23  last_offset_delta       int32
    27  base_timestamp          int64
    35  max_timestamp           int64
    43  producer_id             int64
    51  producer_epoch          int16
    53  base_sequence           int32
    57  records_count           int32
    61  records...
"""

from __future__ import annotations

from struct import Struct, calcsize, pack_into
from typing import Any, NamedTuple

import crc32c

from pybroker.protocol.errors import ErrorCode

HEADER = Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = calcsize(">qi")  # 12: base_offset + batch_length, the part batch_length does not count

BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = calcsize(">q")
PARTITION_LEADER_EPOCH_OFFSET = calcsize(">qi")
MAGIC_OFFSET = calcsize(">qii")
CRC_OFFSET = calcsize(">qiib")
ATTRIBUTES_OFFSET = calcsize(">qiibI")
LAST_OFFSET_DELTA_OFFSET = calcsize(">qiibIh")
BASE_TIMESTAMP_OFFSET = calcsize(">qiibIhi")
MAX_TIMESTAMP_OFFSET = calcsize(">qiibIhiq")
PRODUCER_ID_OFFSET = calcsize(">qiibIhiqq")
RECORDS_COUNT_OFFSET = calcsize(">qiibIhiqqqhi")

#: the smallest legal batch_length: the header after the length field, with no records
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_INT64 = Struct(">q")
_INT32 = Struct(">i")
_UINT32 = Struct(">I")


class RecordsError(Exception):
    """Records refused, with the Kafka error code the partition's answer carries."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record, wrapping at int32 as Kafka's producers do."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def parse_header(buf: Any, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_SIZE:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record batch shorter than its header")
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def iter_batches(buf: Any, pos: int = 0, end: int | None = None) -> Any:
    """(position, header) of each whole batch in buf[pos:end]; stops quietly at an incomplete tail.

    A batch whose length field is below the legal minimum also stops the walk: nothing after it can
    be trusted to be a batch boundary.
    """
    end = len(buf) if end is None else end
    unpack = HEADER.unpack_from
    while end - pos >= HEADER_SIZE:
        header = BatchHeader._make(unpack(buf, pos))
        size = header.batch_length + LOG_OVERHEAD
        if header.batch_length < MIN_BATCH_LENGTH or pos + size > end:
            return
        yield pos, header
        pos += size


def compute_crc(buf: Any, pos: int, header: BatchHeader) -> int:
    view = memoryview(buf)
    try:
        return int(crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + header.size]))
    finally:
        view.release()


def crc_ok(buf: Any, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header) == header.crc


def patch_base_offset(buf: Any, pos: int, base_offset: int) -> None:
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def patch_leader_epoch(buf: Any, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def rewrite_crc(buf: Any, pos: int) -> None:
    """Recompute and store the CRC after a change inside the CRC-covered range."""
    header = parse_header(buf, pos)
    pack_into(">I", buf, pos + CRC_OFFSET, compute_crc(buf, pos, header))
