"""Individual records inside a v2 batch: decoding and building, for the few places that need them.

The produce and fetch paths never come here. This is for LogAppendTime, key checks on compacted
topics, ListOffsets by timestamp inside a batch, the cleaner, tools and tests. Record fields use
zigzag varints; every length is checked against what is left before anything is sliced.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from struct import pack_into
from typing import Any

import crc32c

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    RecordsError,
    compute_crc,
)
from pybroker.protocol.records.codecs import compress, decompress

#: the default cap on a batch's decompressed size
MAX_DECOMPRESSED = 64 * 1024 * 1024


@dataclass(slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0


def _corrupt(message: str) -> RecordsError:
    return RecordsError(ErrorCode.CORRUPT_MESSAGE, message)


def read_varint(buf: Any, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """A zigzag-encoded signed varint (Kafka's record fields)."""
    value = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= len(buf):
            raise _corrupt("truncated varint")
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos + i + 1
        shift += 7
    raise _corrupt("varint too long")


def write_varint(out: bytearray, value: int) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    zigzag &= (1 << 64) - 1
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _read_blob(buf: Any, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos, 5)
    if n < 0:
        return None, pos
    if n > end - pos:
        raise _corrupt("record field overruns its record")
    return bytes(buf[pos : pos + n]), pos + n


def _decode_record(buf: Any, pos: int) -> tuple[Record, int]:
    length, pos = read_varint(buf, pos, 5)
    end = pos + length
    if length < 1 or end > len(buf):
        raise _corrupt("record length overruns the batch")
    attributes = buf[pos]
    pos += 1
    timestamp_delta, pos = read_varint(buf, pos)
    offset_delta, pos = read_varint(buf, pos, 5)
    key, pos = _read_blob(buf, pos, end)
    value, pos = _read_blob(buf, pos, end)
    count, pos = read_varint(buf, pos, 5)
    if count < 0 or count > end - pos:
        raise _corrupt("bad header count")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        raw_key, pos = _read_blob(buf, pos, end)
        if raw_key is None:
            raise _corrupt("null header key")
        header_value, pos = _read_blob(buf, pos, end)
        try:
            headers.append((raw_key.decode(), header_value))
        except UnicodeDecodeError:
            raise _corrupt("header key is not UTF-8") from None
    if pos != end:
        raise _corrupt("record length does not match its fields")
    return Record(offset_delta, timestamp_delta, key, value, headers, attributes), pos


def decode_records(buf: Any, pos: int, header: BatchHeader, max_size: int = MAX_DECOMPRESSED) -> list[Record]:
    """Every record of the batch at `pos` (decompressed with a cap)."""
    body_start = pos + HEADER_SIZE
    body_end = pos + header.size
    if body_end > len(buf) or header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise _corrupt("batch overruns the buffer")
    body: Any = memoryview(buf)[body_start:body_end]
    if header.compression:
        body = decompress(header.compression, body, max_size)
    if header.records_count < 0 or header.records_count > len(body):
        raise _corrupt("bad record count")
    records: list[Record] = []
    p = 0
    for _ in range(header.records_count):
        record, p = _decode_record(body, p)
        records.append(record)
    if p != len(body):
        raise _corrupt("bytes after the last record")
    return records


def encode_record(out: bytearray, record: Record) -> None:
    body = bytearray([record.attributes & 0xFF])
    write_varint(body, record.timestamp_delta)
    write_varint(body, record.offset_delta)
    for blob in (record.key, record.value):
        if blob is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(blob))
            body += blob
    write_varint(body, len(record.headers))
    for key, value in record.headers:
        raw = key.encode()
        write_varint(body, len(raw))
        body += raw
        if value is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(value))
            body += value
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    timestamp_type: int = 0,
    base_timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A complete, valid v2 batch (correct CRC and max timestamp). Sans-I/O: the caller gives the time."""
    records = list(records)
    if not records:
        raise ValueError("a batch needs at least one record")
    body = bytearray()
    for record in records:
        encode_record(body, record)
    payload = compress(compression, bytes(body)) if compression else bytes(body)
    attributes = (compression & 0x07) | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
    attributes |= (TRANSACTIONAL_MASK if is_transactional else 0) | (CONTROL_MASK if is_control else 0)
    last_offset_delta = max(r.offset_delta for r in records)
    max_timestamp = base_timestamp + max(r.timestamp_delta for r in records)
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch, 2, 0,
                     attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                     base_sequence, len(records))
    out += payload
    pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def set_log_append_time(buf: Any, pos: int, header: BatchHeader, timestamp_ms: int) -> None:
    """What Kafka does to a v2 batch on a LogAppendTime topic: set the timestamp-type bit and the max
    timestamp to the broker's clock, leave the records as they are, and recompute the CRC."""
    pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    pack_into(">q", buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    updated = header._replace(attributes=header.attributes | TIMESTAMP_TYPE_MASK, max_timestamp=timestamp_ms)
    pack_into(">I", buf, pos + CRC_OFFSET, compute_crc(buf, pos, updated))
