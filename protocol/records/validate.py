"""Produce-path validation of a partition's records, header-only: no record is decoded.

The rules and codes follow Kafka 4 (the produce request's own checks, then the log validator's):
- exactly one batch of magic 2 per partition (INVALID_RECORD 87), zstd only from Produce v7
  (UNSUPPORTED_COMPRESSION_TYPE 76);
- a length field that disagrees with the bytes, a truncated batch or trailing bytes, a bad CRC-32C, an
  unknown codec: CORRUPT_MESSAGE (2);
- `records_count` must equal `last_offset_delta + 1`, control batches may not come from clients, and a
  batch with a producer id needs a sequence: INVALID_RECORD (87);
- a batch above the topic's `max.message.bytes`: MESSAGE_TOO_LARGE (10).
Only compacted topics (`require_keys`) decode records, to refuse keyless ones (INVALID_RECORD).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import (
    HEADER_SIZE,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    BatchHeader,
    RecordsError,
    crc_ok,
    parse_header,
)
from pybroker.protocol.records.codecs import ZSTD
from pybroker.protocol.records.record import decode_records

MAGIC_V2 = 2
KNOWN_CODECS = frozenset(range(5))


@dataclass(slots=True)
class ValidatedRecords:
    batches: list[tuple[int, BatchHeader]]
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    size_bytes: int
    max_timestamp: int


def _invalid(message: str) -> RecordsError:
    return RecordsError(ErrorCode.INVALID_RECORD, message)


def _corrupt(message: str) -> RecordsError:
    return RecordsError(ErrorCode.CORRUPT_MESSAGE, message)


def validate_produce_records(buf: Any, *, max_batch_bytes: int, allow_zstd: bool,
                             require_keys: bool = False) -> ValidatedRecords:
    size = len(buf)
    if size < HEADER_SIZE:
        if size > MAGIC_OFFSET and buf[MAGIC_OFFSET] != MAGIC_V2:
            # enough to see the magic byte of an old-format message set
            raise _invalid("Produce requests with version 3 and above must contain record batches of magic 2")
        raise _corrupt("records shorter than a batch header")
    header = parse_header(buf, 0)
    if header.magic != MAGIC_V2:
        raise _invalid("Produce requests with version 3 and above must contain record batches of magic 2")
    if header.batch_length < MIN_BATCH_LENGTH or header.size > size:
        raise _corrupt(f"batch length {header.batch_length} does not fit the {size} bytes sent")
    if header.size < size:
        raise _invalid("Produce requests must contain exactly one record batch per partition")
    if header.size > max_batch_bytes:
        raise RecordsError(ErrorCode.MESSAGE_TOO_LARGE,
                           f"batch of {header.size} bytes exceeds max.message.bytes {max_batch_bytes}")
    if header.compression not in KNOWN_CODECS:
        raise _corrupt(f"unknown compression codec {header.compression}")
    if header.compression == ZSTD and not allow_zstd:
        raise RecordsError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                           "zstd compression needs Produce version 7 or above")
    if not crc_ok(buf, 0, header):
        raise _corrupt("record batch CRC mismatch")
    if header.records_count <= 0 or header.last_offset_delta < 0 \
            or header.records_count != header.last_offset_delta + 1:
        raise _invalid(f"inconsistent batch: {header.records_count} records, last offset delta "
                       f"{header.last_offset_delta}")
    if header.is_control:
        raise _invalid("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise _invalid("a batch with a producer id must carry a sequence number")
    if require_keys:
        for record in decode_records(buf, 0, header):
            if record.key is None:
                raise _invalid("compacted topic cannot accept message without key")
    return ValidatedRecords(
        batches=[(0, header)],
        record_count=header.records_count,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        size_bytes=header.size,
        max_timestamp=header.max_timestamp,
    )
