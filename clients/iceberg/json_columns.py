"""JSON Schema values as Arrow columns (Confluent's JSON Schema wire format: the prefix, then JSON text).

The table's value columns are the properties of the schema's top-level object (any other schema is one
column, `value`). Types:

| JSON Schema | Arrow (Iceberg) |
|---|---|
| string (an `enum` of strings too) | string |
| integer | int64 (long) |
| number | float64 (double); `[integer, number]` too |
| boolean | bool |
| array with `items` | list |
| object with `properties` | struct (its properties; others in a value are not kept) |
| object with only `additionalProperties` (a schema) | map<string, V> |
| `type: [T, "null"]`, `anyOf`/`oneOf` of T and null | T |

Every column is nullable (a property not required, or absent from an older schema, is null). A schema
the table cannot hold raises `Unsupported` (its records go to the dead-letter table with that reason):
several non-null types, an object with neither properties nor an additionalProperties schema, an array
without `items`, a `$ref` outside the document, a recursive `$ref`, a property named `kafka`.

Decoding: the JSON is parsed, validated against the registered schema (`jsonschema`, the draft its
`$schema` names, as the registry checked it), then each value is fitted to its column: an integer past
int64, or a value of another type than its column's, raises `ValueError` for that record alone. Pure:
any thread may call these.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pybroker.clients.iceberg.avro_columns import MAX_DEPTH, RESERVED, Unsupported

if TYPE_CHECKING:
    import pyarrow as pa

INT64 = (-(2 ** 63), 2 ** 63 - 1)
Convert = Callable[[Any], Any]


def _deref(schema: Any, root: Any) -> Any:
    """Follow local `$ref`s (`#/...` JSON pointers) to the schema they name."""
    for _ in range(MAX_DEPTH):
        if not isinstance(schema, dict) or "$ref" not in schema:
            return schema
        ref = str(schema["$ref"])
        if not ref.startswith("#"):
            raise Unsupported(f"the $ref {ref!r} names another document")
        schema = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(schema, dict) or part not in schema:
                raise Unsupported(f"the $ref {ref!r} names nothing")
            schema = schema[part]
    raise Unsupported("$refs nested too deeply")


def _non_null(schema: dict[str, Any], root: Any) -> tuple[dict[str, Any], str | None]:
    """The schema without its null alternative, and its one non-null type (None when it names none)."""
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            resolved = [_deref(b, root) for b in branches]
            kept = [b for b in resolved if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(kept) != 1 or not isinstance(kept[0], dict):
                raise Unsupported(f"{key} of several non-null schemas has no single column type")
            return _non_null({**{k: v for k, v in schema.items() if k != key}, **kept[0]}, root)
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else list(kind) if isinstance(kind, list) else []
    kinds = [k for k in kinds if k != "null"]
    if set(kinds) == {"integer", "number"}:
        return schema, "number"
    if len(kinds) > 1:
        raise Unsupported(f"a value of several types ({', '.join(kinds)}) has no single column type")
    if kinds:
        return schema, kinds[0]
    if "properties" in schema or "additionalProperties" in schema:
        return schema, "object"
    if "items" in schema:
        return schema, "array"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum if v is not None):
        return schema, "string"
    return schema, None


def _scalar(kind: str) -> tuple[pa.DataType, Convert]:
    import pyarrow as pa

    def string(v: Any) -> str:
        if not isinstance(v, str):
            raise ValueError(f"{v!r} is not a string")
        return v

    def integer(v: Any) -> int:
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{v!r} is not an integer")
        if not INT64[0] <= v <= INT64[1]:
            raise ValueError(f"{v} does not fit a long column")
        return v

    def number(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"{v!r} is not a number")
        try:
            return float(v)
        except OverflowError:
            raise ValueError(f"{v} does not fit a double column") from None

    def boolean(v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError(f"{v!r} is not a boolean")
        return v

    table: dict[str, tuple[pa.DataType, Convert]] = {
        "string": (pa.string(), string), "integer": (pa.int64(), integer), "number": (pa.float64(), number),
        "boolean": (pa.bool_(), boolean)}
    if kind not in table:
        raise Unsupported(f"type {kind!r} has no column type")
    return table[kind]


def _nullable(convert: Convert) -> Convert:
    return lambda v: None if v is None else convert(v)


def column(schema: Any, root: Any, depth: int = 0, refs: frozenset[str] = frozenset()) -> tuple[pa.DataType, Convert]:
    """The Arrow type of a (sub)schema, and the function that fits a JSON value to it (None stays None)."""
    import pyarrow as pa

    if depth > MAX_DEPTH:
        raise Unsupported(f"nested deeper than {MAX_DEPTH}")
    if isinstance(schema, dict) and "$ref" in schema:
        ref = str(schema["$ref"])
        if ref in refs:
            raise Unsupported(f"the recursive $ref {ref!r} has no table columns")
        refs = refs | {ref}
    schema = _deref(schema, root)
    if not isinstance(schema, dict):
        raise Unsupported("a boolean schema (any value) has no column type")
    schema, kind = _non_null(schema, root)
    if kind == "object":
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            names, types, converts = [], [], []
            for name, sub in properties.items():
                kind_of, convert = column(sub, root, depth + 1, refs)
                names.append(name)
                types.append(pa.field(name, kind_of))
                converts.append(convert)
            pairs = list(zip(names, converts, strict=True))

            def struct(v: Any) -> dict[str, Any]:
                if not isinstance(v, dict):
                    raise ValueError(f"{type(v).__name__} where an object belongs")
                return {name: convert(v.get(name)) for name, convert in pairs}

            return pa.struct(types), _nullable(struct)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            value_type, convert_value = column(extra, root, depth + 1, refs)

            def mapping(v: Any) -> list[tuple[str, Any]]:
                if not isinstance(v, dict):
                    raise ValueError(f"{type(v).__name__} where an object belongs")
                return [(k, convert_value(x)) for k, x in v.items()]

            return pa.map_(pa.string(), value_type), _nullable(mapping)
        raise Unsupported("an object with neither properties nor an additionalProperties schema has no columns")
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            raise Unsupported("an array without one `items` schema has no column type")
        item_type, convert_item = column(items, root, depth + 1, refs)

        def array(v: Any) -> list[Any]:
            if not isinstance(v, list):
                raise ValueError(f"{type(v).__name__} where an array belongs")
            return [convert_item(x) for x in v]

        return pa.list_(item_type), _nullable(array)
    if kind is None:
        raise Unsupported("a schema that names no type has no column type")
    kind_of, convert = _scalar(kind)
    return kind_of, _nullable(convert)


def value_fields(schema: Any) -> tuple[pa.Schema, Convert]:
    """The table's value columns for a JSON Schema (an object's properties, else one column `value`) and
    the function that makes a row of a validated value."""
    import pyarrow as pa

    kind, convert = column(schema, schema)
    if pa.types.is_struct(kind):
        fields = list(kind)
        row = convert
    else:
        fields = [pa.field("value", kind)]

        def row(v: Any) -> dict[str, Any]:
            return {"value": convert(v)}

    if any(f.name == RESERVED for f in fields):
        raise Unsupported(f"a value field named {RESERVED!r} collides with the Kafka coordinates' column")
    return pa.schema(fields), row


def decoder(schema: Any) -> tuple[pa.Schema, Callable[[bytes], dict[str, Any]]]:
    """(value columns, `payload -> row`) for a registered JSON Schema; the decoder raises ValueError-like
    errors for a payload that is not JSON, does not validate, or does not fit the columns."""
    import jsonschema

    fields, row = value_fields(schema)
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)(schema)

    def decode(payload: bytes) -> dict[str, Any]:
        value = json.loads(payload)
        if validator.is_valid(value):  # the common case, without collecting errors (several times faster)
            error = None
        else:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the value"
            raise ValueError(f"does not validate at {where}: {error.message[:200]}")
        out: dict[str, Any] | None = row(value)
        if out is None:
            raise ValueError("the value is JSON null")
        return out

    return fields, decode
