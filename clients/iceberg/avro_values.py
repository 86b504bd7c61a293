"""Avro values as fastavro reads them, made into what pyarrow takes for the table's columns.

Mostly they are taken as they are (maps as dicts, dates and timestamps as datetime objects, decimals as
Decimal); UUIDs become text, and a union of several non-null types becomes a struct with one field per
non-null branch, `member0`, `member1`, ... in the union's order (Spark's and Databricks' names for the
same mapping), the branch the value took set and the others null.

Which branch a value took: fastavro returns the value alone, so the branch is told by the kind of Python
value it reads (`branch_kind`): bool, int, float, str, bytes, Decimal, date, datetime, time, list, dict;
named types (records, enums, fixed) by name when the union has more than one of them (fastavro's
`return_named_type` with its override gives a (name, value) pair then). A union two of whose branches
read as the same kind (int and long, float and double, a record and a map, an enum and a string) cannot
be told apart: `avro_columns` refuses it (`Unsupported`) when it maps the schema.

Pure: any thread may call these.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Callable
from typing import Any

Convert = Callable[[Any], Any]
NAMED = ("record", "error", "enum", "fixed")
#: logicalType -> the Python kind fastavro reads it as
_LOGICAL_KINDS = {"decimal": "decimal", "date": "date", "time-millis": "time", "time-micros": "time",
                  "timestamp-millis": "datetime", "timestamp-micros": "datetime",
                  "local-timestamp-millis": "datetime", "local-timestamp-micros": "datetime", "uuid": "str"}
_PRIMITIVE_KINDS = {"boolean": "bool", "int": "int", "long": "int", "float": "float", "double": "float",
                    "string": "str", "bytes": "bytes"}
#: kind -> does this Python value have it
_MATCHES: dict[str, Callable[[Any], bool]] = {
    "bool": lambda v: isinstance(v, bool), "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, float), "str": lambda v: isinstance(v, str | uuid.UUID),
    "bytes": lambda v: isinstance(v, bytes), "decimal": lambda v: isinstance(v, decimal.Decimal),
    "date": lambda v: type(v) is datetime.date, "datetime": lambda v: isinstance(v, datetime.datetime),
    "time": lambda v: isinstance(v, datetime.time), "list": lambda v: isinstance(v, list),
    "dict": lambda v: isinstance(v, dict)}


def _resolve(schema: Any, named: dict[str, Any]) -> Any:
    return named.get(schema, schema) if isinstance(schema, str) else schema


def branch_kind(schema: Any, named: dict[str, Any], by_name: bool) -> str:
    """The kind of Python value a union branch reads as (`by_name`: the union has two named types or more,
    so a named branch reads as a (name, value) pair, told by its name)."""
    schema = _resolve(schema, named)
    if isinstance(schema, str):
        return _PRIMITIVE_KINDS.get(schema, schema)
    if isinstance(schema, dict):
        kind = schema.get("type")
        logical = _LOGICAL_KINDS.get(str(schema.get("logicalType")))
        if logical is not None and kind not in ("record", "error"):
            return logical
        if kind in NAMED and by_name:
            return f"named:{schema.get('name')}"
        own = {"record": "dict", "error": "dict", "map": "dict", "array": "list", "enum": "str", "fixed": "bytes"}
        if kind in own:
            return own[str(kind)]
        return branch_kind(kind, named, by_name)
    return "union"


def _named_count(branches: list[Any], named: dict[str, Any]) -> int:
    return sum(1 for b in branches if isinstance(_resolve(b, named), dict) and _resolve(b, named).get("type") in NAMED)


def union_branches(schema: list[Any], named: dict[str, Any]) -> tuple[list[Any], list[str]]:
    """A union's non-null branches and the kind each reads as (the caller checks that they differ)."""
    branches = [b for b in schema if b != "null"]
    by_name = _named_count(branches, named) > 1
    return branches, [branch_kind(b, named, by_name) for b in branches]


def converter(schema: Any, named: dict[str, Any], depth: int = 0) -> Convert:
    """`fastavro value -> pyarrow value` for a schema (None stays None). The schema was mapped by
    `avro_columns.arrow_type` first, so it is not recursive and its unions can be told apart."""
    def same(v: Any) -> Any:
        return v

    if depth > 64:
        return same
    schema = _resolve(schema, named)
    if isinstance(schema, list):
        branches, kinds = union_branches(schema, named)
        if len(branches) == 1:
            return converter(branches[0], named, depth + 1)
        by_name = any(k.startswith("named:") for k in kinds)
        members = [(f"member{i}", kind, converter(b, named, depth + 1)) for i, (b, kind) in enumerate(zip(branches, kinds, strict=True))]

        def union(v: Any) -> Any:
            if v is None:
                return None
            out: dict[str, Any] = {name: None for name, _, _ in members}
            for name, kind, convert in members:
                if kind.startswith("named:"):
                    if isinstance(v, tuple) and v[0] == kind[6:]:
                        out[name] = convert(v[1])
                        return out
                elif _MATCHES.get(kind, lambda _: False)(v if not (by_name and isinstance(v, tuple)) else None):
                    out[name] = convert(v)
                    return out
            raise ValueError(f"a value of type {type(v).__name__} fits no branch of the union")

        return union
    if not isinstance(schema, dict):
        return same
    kind = schema.get("type")
    if schema.get("logicalType") == "uuid":
        return lambda v: None if v is None else str(v)
    if kind in ("record", "error"):
        fields = [(f["name"], converter(f["type"], named, depth + 1)) for f in schema.get("fields", [])]
        return lambda v: None if v is None else {name: convert(v.get(name)) for name, convert in fields}
    if kind == "array":
        item = converter(schema["items"], named, depth + 1)
        return lambda v: None if v is None else [item(x) for x in v]
    if kind == "map":
        value = converter(schema["values"], named, depth + 1)
        return lambda v: None if v is None else {k: value(x) for k, x in v.items()}
    if isinstance(kind, str | list | dict) and kind not in NAMED and kind not in _PRIMITIVE_KINDS:
        return converter(kind, named, depth + 1)
    return same
