"""Avro schemas as Arrow columns, and Avro values (Confluent's payload) as rows of them.

The table's value columns are the fields of the schema's top-level record (any other schema is one column,
`value`). Types (Redpanda's mapping, as Iceberg can hold them):

| Avro | Arrow (Iceberg) |
|---|---|
| boolean, int, long, float, double, string, bytes | bool, int32, int64, float32, float64, string, binary |
| fixed(n) | fixed_size_binary(n) (fixed[n]) |
| enum | string (the symbol) |
| record | struct |
| array, map | list, map<string, V> |
| union of null and one type | that type (every value column is nullable anyway) |
| union of several non-null types | struct<member0, member1, ...>: one field per non-null branch (`avro_values.py`) |
| date, time-millis/micros | date32, time64[us] |
| timestamp-millis/micros | timestamp[us, UTC] (timestamptz); local-timestamp-* as timestamp[us] |
| decimal(p, s) on bytes or fixed | decimal128(p, s) (precision at most 38) |
| uuid on string | string |

Every value column is nullable: a field a later schema removes is null in the rows it writes, and a
required column could not be added to a table that already has rows. A union two of whose branches read
as the same kind of value (int and long, a record and a map: `avro_values.py`), a recursive type, or a
column named `kafka` (the coordinates' column) is a schema the table cannot
hold: `Unsupported`, and its records go to the dead-letter table with that reason. So is an array of
items that take no bytes: its count alone could make a few bytes decode into 2**63 items (the decoding's
cap; every other item takes at least a byte, so a value decodes into at most as many items as it has bytes).

Decoding is fastavro's `schemaless_reader`; bytes left after the value make it not decodable. Pure: any
thread may call these.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

#: nesting deeper than this (or a recursive type) is not a table's column
MAX_DEPTH = 32
#: the coordinates' column; a value field of this name would collide with it
RESERVED = "kafka"


class Unsupported(ValueError):
    """This schema has no Iceberg columns here (a multi-type union, a recursive type, ...)."""


def _primitive(name: str) -> pa.DataType | None:
    import pyarrow as pa

    return {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
            "double": pa.float64(), "string": pa.string(), "bytes": pa.binary()}.get(name)


def _logical(schema: dict[str, Any]) -> pa.DataType | None:
    import pyarrow as pa

    logical, base = schema.get("logicalType"), schema.get("type")
    if logical == "date" and base == "int":
        return pa.date32()
    if logical in ("time-millis", "time-micros"):
        return pa.time64("us")
    if logical in ("timestamp-millis", "timestamp-micros") and base == "long":
        return pa.timestamp("us", tz="UTC")
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and base == "long":
        return pa.timestamp("us")
    if logical == "decimal" and base in ("bytes", "fixed"):
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if isinstance(precision, int) and isinstance(scale, int) and 0 < precision <= 38 and 0 <= scale <= precision:
            return pa.decimal128(precision, scale)
    if logical == "uuid" and base == "string":
        return pa.string()
    return None


def arrow_type(schema: Any, named: dict[str, Any], depth: int = 0, seen: frozenset[str] = frozenset()) -> pa.DataType:
    """The Arrow type of an Avro schema (fastavro's parsed form: names fully qualified)."""
    import pyarrow as pa

    if depth > MAX_DEPTH:
        raise Unsupported(f"nested deeper than {MAX_DEPTH}")
    if isinstance(schema, str):
        primitive = _primitive(schema)
        if primitive is not None:
            return primitive
        if schema in seen:
            raise Unsupported(f"the recursive type {schema} has no table columns")
        if schema not in named:
            raise Unsupported(f"unknown type {schema}")
        return arrow_type(named[schema], named, depth + 1, seen | {schema})
    if isinstance(schema, list):
        from pybroker.clients.iceberg.avro_values import union_branches

        branches, kinds = union_branches(schema, named)
        if not branches:
            raise Unsupported("a union of null alone has no column type")
        if len(branches) == 1:
            return arrow_type(branches[0], named, depth + 1, seen)
        if len(set(kinds)) != len(kinds) or "union" in kinds:
            raise Unsupported(f"a union whose branches read as the same kind of value ({', '.join(kinds)}) "
                              "cannot say which branch a value took")
        return pa.struct([pa.field(f"member{i}", arrow_type(b, named, depth + 1, seen))
                          for i, b in enumerate(branches)])
    if not isinstance(schema, dict):
        raise Unsupported(f"not an Avro schema: {schema!r}")
    logical = _logical(schema)
    if logical is not None:
        return logical
    kind = schema.get("type")
    name = schema.get("name")
    if kind in ("record", "error"):
        inner = seen | {name} if isinstance(name, str) else seen
        return pa.struct([pa.field(f["name"], arrow_type(f["type"], named, depth + 1, inner))
                          for f in schema["fields"]])
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary(int(schema["size"]))
    if kind == "array":
        if _zero_size(schema["items"], named):
            raise Unsupported("an array of items that take no bytes (a few bytes could claim 2**63 of them)")
        return pa.list_(arrow_type(schema["items"], named, depth + 1, seen))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(schema["values"], named, depth + 1, seen))
    return arrow_type(kind, named, depth + 1, seen)


def _zero_size(schema: Any, named: dict[str, Any], depth: int = 0) -> bool:
    """Whether a value of this schema may be encoded in no bytes (null, fixed(0), a record of such)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(schema, str):
        return schema == "null" or (schema in named and _zero_size(named[schema], named, depth + 1))
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "fixed":
            return schema.get("size") == 0
        if kind in ("record", "error"):
            return all(_zero_size(f["type"], named, depth + 1) for f in schema.get("fields", []))
        return isinstance(kind, str) and kind not in ("array", "map", "enum") and _zero_size(kind, named, depth + 1)
    return False  # a union's branch index takes a byte


def value_fields(schema: Any, named: dict[str, Any]) -> pa.Schema:
    """The table's value columns for a schema: a record's fields, else one column `value`."""
    import pyarrow as pa

    top = named.get(schema, schema) if isinstance(schema, str) else schema
    kind = arrow_type(schema, named)
    if isinstance(top, dict) and top.get("type") in ("record", "error"):
        fields = [pa.field(f.name, f.type) for f in kind]
    else:
        fields = [pa.field("value", kind)]
    if any(f.name == RESERVED for f in fields):
        raise Unsupported(f"a value field named {RESERVED!r} collides with the Kafka coordinates' column")
    return pa.schema(fields)


def decoder(parsed: Any, fields: pa.Schema, is_record: bool, named: dict[str, Any] | None = None) -> Any:
    """`payload -> row dict` for one parsed schema (raises ValueError-like errors for bad bytes). Named
    types in a union with others come as (name, value) pairs, so `avro_values` can tell the branch."""
    from fastavro import schemaless_reader

    from pybroker.clients.iceberg.avro_values import converter

    convert = converter(parsed, named or {})

    def decode(payload: bytes) -> dict[str, Any]:
        stream = io.BytesIO(payload)
        value = schemaless_reader(stream, parsed, None, return_named_type=True, return_named_type_override=True)
        if stream.tell() != len(payload):
            raise ValueError(f"{len(payload) - stream.tell()} bytes left after the value")
        value = convert(value)
        return value if is_record else {"value": value}

    return decode
