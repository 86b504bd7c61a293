"""Individual records inside a v2 batch: decoding and building, for the few places that need them.

The produce and fetch paths never come here. This is for key checks on compacted topics, timestamp
lookups inside a batch, the cleaner, control records, tools and tests. Every length read from the
wire is checked against what is left before anything is sliced.

Header keys are strings in Kafka's API but arbitrary bytes on the wire; they are decoded with
`surrogateescape` so that a batch decoded and rebuilt (the cleaner) keeps its exact bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    Buffer,
    RecordsError,
    WritableBuffer,
    attributes_for,
    patch_attributes,
    patch_max_timestamp,
    rewrite_crc,
)
from pybroker.protocol.records.codecs import NONE, compress, decompress
from pybroker.protocol.records.varint import read_varint, read_varlong, varint_size, write_varint

__all__ = [
    "MAX_DECOMPRESSED",
    "Record",
    "batch_body",
    "build_batch",
    "decode_body",
    "decode_records",
    "encode_record",
    "read_varint",
    "read_varlong",
    "set_log_append_time",
    "varint_size",
    "write_varint",
]

#: the default cap on a batch's decompressed size
MAX_DECOMPRESSED = 64 * 1024 * 1024
_HEADER_KEY_ENCODING = ("utf-8", "surrogateescape")


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


def _read_blob(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    """A varint length then that many bytes; a negative length is null, as Kafka reads it."""
    size, pos = read_varint(buf, pos)
    if size < 0:
        return None, pos
    if size > end - pos:
        raise _corrupt("record field overruns its record")
    return buf[pos : pos + size], pos + size


def _decode_record(buf: bytes, pos: int) -> tuple[Record, int]:
    length, pos = read_varint(buf, pos)
    end = pos + length
    if length < 1 or end > len(buf):
        raise _corrupt(f"record length {length} overruns the batch")
    attributes = buf[pos]
    timestamp_delta, pos = read_varlong(buf, pos + 1)
    offset_delta, pos = read_varint(buf, pos)
    key, pos = _read_blob(buf, pos, end)
    value, pos = _read_blob(buf, pos, end)
    count, pos = read_varint(buf, pos)
    if count < 0 or count > end - pos:  # every header takes at least two bytes
        raise _corrupt(f"bad header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        raw_key, pos = _read_blob(buf, pos, end)
        if raw_key is None:
            raise _corrupt("null header key")
        header_value, pos = _read_blob(buf, pos, end)
        headers.append((raw_key.decode(*_HEADER_KEY_ENCODING), header_value))
    if pos > end:
        raise _corrupt("record fields overrun the record length")
    if pos != end:
        raise _corrupt("record length does not match its fields")
    return Record(offset_delta, timestamp_delta, key, value, headers, attributes), pos


def batch_body(buf: Buffer, pos: int, header: BatchHeader, max_size: int = MAX_DECOMPRESSED) -> bytes:
    """The record bytes of the batch at `pos`, decompressed (under `max_size`) when the batch is."""
    if header.batch_length < MIN_BATCH_LENGTH or pos < 0 or pos + header.size > len(buf):
        raise _corrupt("batch overruns the buffer")
    with memoryview(buf) as view:
        body = view[pos + HEADER_SIZE : pos + header.size]
        return decompress(header.compression, body, max_size)


def decode_body(body: bytes, records_count: int) -> list[Record]:
    """`records_count` records from uncompressed record bytes, which they must fill exactly."""
    if records_count < 0 or records_count > len(body):  # a record takes at least one byte
        raise _corrupt(f"bad record count {records_count}")
    records: list[Record] = []
    pos = 0
    for _ in range(records_count):
        record, pos = _decode_record(body, pos)
        records.append(record)
    if pos != len(body):
        raise _corrupt("bytes after the last record")
    return records


def decode_records(buf: Buffer, pos: int, header: BatchHeader, max_size: int = MAX_DECOMPRESSED) -> list[Record]:
    """Every record of the batch at `pos` (decompressed under `max_size`); RecordsError when malformed."""
    return decode_body(batch_body(buf, pos, header, max_size), header.records_count)


def _write_blob(out: bytearray, blob: bytes | None) -> None:
    if blob is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(blob))
        out += blob


def encode_record(out: bytearray, record: Record) -> None:
    """Append one record (its length prefix included) as it appears inside a v2 batch."""
    body = bytearray((record.attributes & 0xFF,))
    write_varint(body, record.timestamp_delta)
    write_varint(body, record.offset_delta)
    _write_blob(body, record.key)
    _write_blob(body, record.value)
    write_varint(body, len(record.headers))
    for key, value in record.headers:
        _write_blob(body, key.encode(*_HEADER_KEY_ENCODING))
        _write_blob(body, value)
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = NONE,
    timestamp_type: int = 0,
    base_timestamp: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    has_delete_horizon: bool = False,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """A complete v2 batch with a correct CRC. Sans-I/O: the caller gives every timestamp.

    `last_offset_delta` and `max_timestamp` default to what the records imply. The cleaner may keep
    a batch with no records (to preserve producer state), as Kafka does: pass `last_offset_delta`.
    """
    records = list(records)
    if not records and last_offset_delta is None:
        raise ValueError("a batch without records needs an explicit last_offset_delta")
    body = bytearray()
    for record in records:
        encode_record(body, record)
    payload = compress(compression, bytes(body)) if compression and records else bytes(body)
    if last_offset_delta is None:
        last_offset_delta = max(record.offset_delta for record in records)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((record.timestamp_delta for record in records), default=0)
    attributes = attributes_for(compression if records else NONE, timestamp_type,
                                is_transactional=is_transactional, is_control=is_control,
                                has_delete_horizon=has_delete_horizon)
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch,
                     MAGIC_V2, 0, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
                     producer_epoch, base_sequence, len(records))
    out += payload
    rewrite_crc(out, 0)
    return bytes(out)


def set_log_append_time(buf: WritableBuffer, pos: int, header: BatchHeader, timestamp_ms: int) -> None:
    """What Kafka does to a v2 batch on a LogAppendTime topic, in place.

    As Kafka's `setMaxTimestamp(LOG_APPEND_TIME, now)`: the attributes are recomposed with the
    timestamp-type bit set (unused bits come out clear), max_timestamp becomes the broker's clock, the
    records are left as they are (readers take every record's timestamp from max_timestamp), and the
    CRC is recomputed.
    """
    attributes = attributes_for(header.compression, 1, is_transactional=header.is_transactional,
                                is_control=header.is_control, has_delete_horizon=header.has_delete_horizon)
    patch_attributes(buf, pos, attributes)
    patch_max_timestamp(buf, pos, timestamp_ms)
    rewrite_crc(buf, pos)
