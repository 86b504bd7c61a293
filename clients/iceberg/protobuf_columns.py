"""Protobuf values as Arrow columns (Confluent's Protobuf wire format: the prefix, the message indexes as
zigzag varints, then the message).

The broker sends each Protobuf schema as the base64 `FileDescriptorProto` its registry makes of it (`.proto`
text or a descriptor as registered, `broker/iceberg_schemas.py`), with the names under which it imports its
references; protobuf's own descriptor pool builds the message classes, and protobuf decodes the bytes.

The table's value columns are the fields of the schema's first message (Confluent's message index [0], the
one a file with one top-level message always writes); a value whose indexes name another message of the
file goes to the dead-letter table with that reason. Types:

| Protobuf | Arrow (Iceberg) |
|---|---|
| double, float, bool, string, bytes | float64, float32, bool, string, binary |
| int32, sint32, sfixed32 | int32 (int) |
| int64, sint64, sfixed64, uint32 | int64 (long) |
| uint64, fixed64 | int64 (long); a value past 2**63-1 does not fit: dead-letter table |
| fixed32 | int64 (long) |
| enum | string (the value's name; a number the enum does not name, as text) |
| message | struct (unset: null); google.protobuf.Timestamp: timestamp[us, UTC] (timestamptz) |
| repeated T, map<K, V> | list, map |

A field without presence (proto3 singular) that is unset holds its default, as protobuf reads it. A
recursive message, a message with no fields, a group, or a field named `kafka` is a schema the table
cannot hold (`Unsupported`). Pure: any thread may call these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pybroker.clients.iceberg.avro_columns import MAX_DEPTH, RESERVED, Unsupported

if TYPE_CHECKING:
    import pyarrow as pa

TIMESTAMP = "google.protobuf.Timestamp"
INT64_MAX = 2 ** 63 - 1
#: message indexes a value may carry (Confluent's prefix; the registry's check takes as many)
MAX_INDEXES = 64
Convert = Callable[[Any], Any]


def read_indexes(payload: bytes) -> tuple[list[int], int]:
    """The message-index path (count, then each index, as zigzag varints; a count of 0 means [0]) and
    where the message starts."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        result = shift = 0
        while True:
            if pos >= len(payload) or shift > 63:
                raise ValueError("the message indexes are cut short")
            byte = payload[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    count = varint()
    if not 0 <= count <= MAX_INDEXES:
        raise ValueError(f"a message-index count of {count}")
    indexes = [varint() for _ in range(count)] or [0]
    return indexes, pos


def _scalars() -> dict[int, tuple[pa.DataType, Convert]]:
    import pyarrow as pa
    from google.protobuf.descriptor import FieldDescriptor as F

    def same(v: Any) -> Any:
        return v

    def unsigned64(v: int) -> int:
        if v > INT64_MAX:
            raise ValueError(f"{v} does not fit a long column")
        return v

    return {F.TYPE_DOUBLE: (pa.float64(), same), F.TYPE_FLOAT: (pa.float32(), same), F.TYPE_BOOL: (pa.bool_(), same),
            F.TYPE_STRING: (pa.string(), same), F.TYPE_BYTES: (pa.binary(), same),
            F.TYPE_INT32: (pa.int32(), same), F.TYPE_SINT32: (pa.int32(), same), F.TYPE_SFIXED32: (pa.int32(), same),
            F.TYPE_INT64: (pa.int64(), same), F.TYPE_SINT64: (pa.int64(), same), F.TYPE_SFIXED64: (pa.int64(), same),
            F.TYPE_UINT32: (pa.int64(), same), F.TYPE_FIXED32: (pa.int64(), same),
            F.TYPE_UINT64: (pa.int64(), unsigned64), F.TYPE_FIXED64: (pa.int64(), unsigned64)}


def _single(field: Any, depth: int, seen: frozenset[str]) -> tuple[pa.DataType, Convert]:
    """The column type of one (not repeated) value of `field`, and how a value of it is converted."""
    import pyarrow as pa
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type == F.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return pa.string(), lambda v: names.get(v, str(v))
    if field.type == F.TYPE_MESSAGE:
        message = field.message_type
        if message.full_name == TIMESTAMP:
            return pa.timestamp("us", tz="UTC"), lambda v: v.seconds * 1_000_000 + v.nanos // 1000
        return message_column(message, depth + 1, seen)
    scalar = _scalars().get(field.type)
    if scalar is None:
        raise Unsupported(f"field {field.full_name}: a group has no column type")
    return scalar


def _field(field: Any, depth: int, seen: frozenset[str]) -> tuple[pa.DataType, Callable[[Any], Any]]:
    """(column type, message -> the column's value) for one field of a message."""
    import pyarrow as pa
    from google.protobuf.descriptor import FieldDescriptor as F

    name = field.name
    message = field.message_type
    if field.is_repeated and message is not None and message.GetOptions().map_entry:
        key_type, key_of = _single(message.fields_by_name["key"], depth, seen)
        value_type, value_of = _single(message.fields_by_name["value"], depth, seen)
        return pa.map_(key_type, value_type), lambda m: [(key_of(k), value_of(v)) for k, v in getattr(m, name).items()]
    kind, convert = _single(field, depth, seen)
    if field.is_repeated:
        return pa.list_(kind), lambda m: [convert(v) for v in getattr(m, name)]
    if field.has_presence or field.type == F.TYPE_MESSAGE:
        return kind, lambda m: convert(getattr(m, name)) if m.HasField(name) else None
    return kind, lambda m: convert(getattr(m, name))


def message_column(message: Any, depth: int = 0, seen: frozenset[str] = frozenset()) -> tuple[pa.DataType, Convert]:
    """A message as a struct column, and the function that makes its dict of a parsed message."""
    import pyarrow as pa

    if depth > MAX_DEPTH:
        raise Unsupported(f"nested deeper than {MAX_DEPTH}")
    if message.full_name in seen:
        raise Unsupported(f"the recursive message {message.full_name} has no table columns")
    if not message.fields:
        raise Unsupported(f"the message {message.full_name} has no fields")
    inner = seen | {message.full_name}
    fields, getters = [], []
    for field in message.fields:
        kind, get = _field(field, depth, inner)
        fields.append(pa.field(field.name, kind))
        getters.append((field.name, get))

    def convert(m: Any) -> dict[str, Any]:
        return {name: get(m) for name, get in getters}

    return pa.struct(fields), convert


def message_at(file: Any, indexes: list[int]) -> Any:
    """The message a Confluent index path names in a file descriptor (top-level, then nested)."""
    messages = list(file.message_types_by_name.values())
    if not messages:
        raise Unsupported("the schema declares no message")
    try:
        message = messages[indexes[0]]
        for index in indexes[1:]:
            message = message.nested_types[index]
    except IndexError:
        raise ValueError(f"the message indexes {indexes} name no message of the schema") from None
    return message


def decoder(file: Any, framed: bool) -> tuple[pa.Schema, Callable[[bytes], dict[str, Any]]]:
    """(value columns, `payload -> row`) for the first message of a file descriptor. `framed`: the payload
    starts with the message indexes (value_schema_id_prefix); else it is the message alone."""
    import pyarrow as pa
    from google.protobuf import message_factory

    message = message_at(file, [0])
    kind, convert = message_column(message)
    fields = pa.schema(list(kind))
    if any(f.name == RESERVED for f in fields):
        raise Unsupported(f"a value field named {RESERVED!r} collides with the Kafka coordinates' column")
    message_class = message_factory.GetMessageClass(message)

    def decode(payload: bytes) -> dict[str, Any]:
        start = 0
        if framed:
            indexes, start = read_indexes(payload)
            if indexes != [0]:
                raise ValueError(f"the message indexes {indexes} name another message than the table's "
                                 f"({message.full_name})")
        out: dict[str, Any] = convert(message_class.FromString(payload[start:]))
        return out

    return fields, decode


def build_file(schema_id: int, schemas: dict[int, dict[str, Any]]) -> Any:
    """A descriptor pool holding schema `schema_id`'s file and its imports (references by the names the
    schema imports them under, well-known types from protobuf's own); its FileDescriptor."""
    import base64

    from google.protobuf import (  # noqa: F401  (loading them puts the well-known files in the default pool)
        any_pb2,
        descriptor_pb2,
        descriptor_pool,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    pool = descriptor_pool.DescriptorPool()
    default = descriptor_pool.Default()
    added: set[str] = set()

    def add(entry_id: int, name: str, depth: int) -> None:
        if name in added:
            return
        if depth > 16:
            raise Unsupported("references nested too deeply")
        entry = schemas.get(entry_id)
        if entry is None or entry.get("type") != "PROTOBUF" or not entry.get("descriptor"):
            raise Unsupported(f"schema id {entry_id} has no Protobuf descriptor")
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(entry["descriptor"]))
        proto.name = name
        imported = dict(zip(entry.get("ref_names") or [], entry.get("refs") or [], strict=False))
        for dependency in proto.dependency:
            if dependency in imported:
                add(int(imported[dependency]), dependency, depth + 1)
            elif dependency not in added:
                try:
                    known = default.FindFileByName(dependency)
                except KeyError:
                    raise Unsupported(f"the import {dependency!r} is neither a reference nor a well-known type") from None
                well_known = descriptor_pb2.FileDescriptorProto()
                known.CopyToProto(well_known)
                pool.Add(well_known)
                added.add(dependency)
        pool.Add(proto)
        added.add(name)

    name = f"pybroker-schema-{schema_id}.proto"
    try:
        add(schema_id, name, 0)
        return pool.FindFileByName(name)
    except Unsupported:
        raise
    except Exception as exc:  # protobuf's complaints about a file it cannot build
        raise Unsupported(f"the descriptor does not build: {type(exc).__name__}: {exc}") from None
