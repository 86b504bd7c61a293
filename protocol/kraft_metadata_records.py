"""The records of Kafka's KRaft metadata log (`__cluster_metadata-0`), decoded from their values.

Each record value in the metadata log and its snapshots is
`frame version (unsigned varint, 0 or 1), record type (unsigned varint), record version (unsigned varint)`
followed by the record's fields. Every record type pybroker reads is flexible in every version Kafka 4
writes: compact strings and arrays (length + 1 as an unsigned varint, 0 for null) and a tagged-field
section at the end. Frame version 0 predates flexible framing and is never written by Kafka 4; it is
refused.

The table below holds only the record types pybroker adopts at a takeover (`storage/kraft_metadata.py`),
and only the fields it reads; what a record holds after them (newer fields, tagged fields) is skipped, so
a newer record version still decodes. The fields listed are the leading fields of every version Kafka
has shipped of that record, so their order is fixed.

Every count and length is checked against the bytes left before anything is allocated: hostile input
raises `MetadataRecordError`, never an IndexError or a giant allocation. Pure; any thread may call it.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

__all__ = ["RECORD_TYPES", "MetadataRecordError", "decode_record", "encode_record"]


class MetadataRecordError(ValueError):
    """A metadata record value that does not decode (truncated, an impossible length, a bad frame)."""


#: record type -> (name, [(field, kind)]) for the leading fields pybroker reads. The kinds:
#: int8/int16/int32/int64, float64, bool, uuid (16 bytes), string (compact, not null), nstring (compact,
#: nullable), bytes (compact, not null), int32s (compact array of int32), entities (ClientQuotaRecord's
#: compact array of {entity type string, entity name nstring, tagged fields}, read as (type, name) pairs).
RECORD_TYPES: dict[int, tuple[str, list[tuple[str, str]]]] = {
    2: ("TopicRecord", [("name", "string"), ("topic_id", "uuid")]),
    3: ("PartitionRecord", [("partition_id", "int32"), ("topic_id", "uuid"), ("replicas", "int32s")]),
    4: ("ConfigRecord", [("resource_type", "int8"), ("resource_name", "string"), ("name", "string"),
                         ("value", "nstring")]),
    9: ("RemoveTopicRecord", [("topic_id", "uuid")]),
    11: ("UserScramCredentialRecord", [("name", "string"), ("mechanism", "int8"), ("salt", "bytes"),
                                       ("stored_key", "bytes"), ("server_key", "bytes"), ("iterations", "int32")]),
    12: ("FeatureLevelRecord", [("name", "string"), ("feature_level", "int16")]),
    14: ("ClientQuotaRecord", [("entity", "entities"), ("key", "string"), ("value", "float64"), ("remove", "bool")]),
    15: ("ProducerIdsRecord", [("broker_id", "int32"), ("broker_epoch", "int64"), ("next_producer_id", "int64")]),
    18: ("AccessControlEntryRecord", [("id", "uuid"), ("resource_type", "int8"), ("resource_name", "string"),
                                      ("pattern_type", "int8"), ("principal", "string"), ("host", "string"),
                                      ("operation", "int8"), ("permission_type", "int8")]),
    19: ("RemoveAccessControlEntryRecord", [("id", "uuid")]),
    22: ("RemoveUserScramCredentialRecord", [("name", "string"), ("mechanism", "int8")]),
}

_FIXED = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
          "int64": struct.Struct(">q"), "float64": struct.Struct(">d"), "bool": struct.Struct(">?")}
_INT32 = _FIXED["int32"]
#: a varint longer than this many bytes is not a 32-bit unsigned varint
_MAX_VARINT_BYTES = 5


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for n in range(_MAX_VARINT_BYTES):
        if pos + n >= len(buf):
            raise MetadataRecordError("truncated varint")
        byte = buf[pos + n]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos + n + 1
        shift += 7
    raise MetadataRecordError("varint longer than 5 bytes")


def _compact_len(buf: bytes, pos: int, unit: int) -> tuple[int, int]:
    """The length (-1 for null) of a compact string/array at `pos`, checked against the bytes left."""
    raw, pos = _uvarint(buf, pos)
    length = raw - 1
    if length * unit > len(buf) - pos:
        raise MetadataRecordError(f"length {length} overruns the record ({len(buf) - pos} bytes left)")
    return length, pos


def _skip_tagged(buf: bytes, pos: int) -> int:
    """Past a tagged-field section: a count, then (tag, size, bytes) each, every size checked."""
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        if size > len(buf) - pos:
            raise MetadataRecordError(f"tagged field of {size} bytes overruns the record")
        pos += size
    return pos


def _entities(buf: bytes, pos: int) -> tuple[list[tuple[str, str | None]], int]:
    # each entity takes at least 3 bytes (two lengths and a tag count): the count is checked against that
    count, pos = _compact_len(buf, pos, 3)
    if count < 0:
        raise MetadataRecordError("null where an entity list must be")
    out = []
    for _ in range(count):
        kind, pos = _read("string", buf, pos)
        name, pos = _read("nstring", buf, pos)
        pos = _skip_tagged(buf, pos)
        out.append((kind, name))
    return out, pos


def _read(kind: str, buf: bytes, pos: int) -> tuple[Any, int]:
    fixed = _FIXED.get(kind)
    if fixed is not None:
        if pos + fixed.size > len(buf):
            raise MetadataRecordError(f"truncated {kind}")
        return fixed.unpack_from(buf, pos)[0], pos + fixed.size
    if kind == "uuid":
        if pos + 16 > len(buf):
            raise MetadataRecordError("truncated uuid")
        return uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16
    if kind == "entities":
        return _entities(buf, pos)
    if kind == "int32s":
        count, pos = _compact_len(buf, pos, 4)
        if count < 0:
            return None, pos
        return [_INT32.unpack_from(buf, pos + 4 * i)[0] for i in range(count)], pos + 4 * count
    length, pos = _compact_len(buf, pos, 1)
    if length < 0:
        if kind != "nstring":
            raise MetadataRecordError(f"null where a {kind} must be")
        return None, pos
    raw = bytes(buf[pos:pos + length])
    if kind == "bytes":
        return raw, pos + length
    try:
        return raw.decode(), pos + length
    except UnicodeDecodeError:
        raise MetadataRecordError("a string that is not UTF-8") from None


def decode_record(value: bytes) -> tuple[str, int, dict[str, Any]] | None:
    """(record name, record version, leading fields) of one record value; None for a type pybroker does not
    adopt. Raises `MetadataRecordError` when the value is malformed."""
    frame, pos = _uvarint(value, 0)
    if frame != 1:
        raise MetadataRecordError(f"unknown metadata frame version {frame}")
    record_type, pos = _uvarint(value, pos)
    version, pos = _uvarint(value, pos)
    entry = RECORD_TYPES.get(record_type)
    if entry is None:
        return None
    name, fields = entry
    out: dict[str, Any] = {}
    for field, kind in fields:
        out[field], pos = _read(kind, value, pos)
    return name, version, out


# -- encoding: for tests and tools (pybroker never writes Kafka's metadata log) ---------------------------
def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _write(kind: str, value: Any) -> bytes:
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed.pack(value)
    if kind == "uuid":
        return value.bytes
    if value is None:
        return b"\x00"
    if kind == "entities":
        return _uvarint_bytes(len(value) + 1) + b"".join(_write("string", t) + _write("nstring", n) + b"\x00"
                                                         for t, n in value)
    if kind == "int32s":
        return _uvarint_bytes(len(value) + 1) + b"".join(_INT32.pack(v) for v in value)
    raw = value if kind == "bytes" else value.encode()
    return _uvarint_bytes(len(raw) + 1) + raw


def encode_record(record_type: int, version: int, fields: dict[str, Any]) -> bytes:
    """A record value with the table's fields of `record_type` and an empty tagged-field section."""
    _, layout = RECORD_TYPES[record_type]
    body = b"".join(_write(kind, fields[name]) for name, kind in layout)
    return _uvarint_bytes(1) + _uvarint_bytes(record_type) + _uvarint_bytes(version) + body + b"\x00"
