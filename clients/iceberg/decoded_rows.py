"""The decoding modes' rows: one read's key_value rows split into typed rows and dead-letter rows.

`split` takes the rows `columns.key_value_rows` made (the `kafka` struct and the raw `value`) and decodes
each value (`value_decoders`). A null value (a tombstone of a keyed, compacted topic) is no error: its
row has the coordinates (the key among them) and every value column null (group `TOMBSTONE_GROUP`), so
a reader sees the delete where the topic has it. Rows that decode are grouped by schema id: each group is a table of the
`kafka` column and that schema's value columns (`Decoded`); the caller evolves the table to every group's
columns, then appends them. Rows that do not decode keep their raw value and get the reason: the
dead-letter table's rows (`dlq_schema`: the Kafka coordinates, `value`, `reason`).

Pure: any thread may call it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pybroker.clients.iceberg.value_decoders import (
    NotDecodable,
    RegistrySchemas,
    ValueDecoder,
    schema_id_prefix,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.schema import Schema

REASON = "reason"
#: a reason is cut to this many characters (it names the schema and the decoder's complaint)
MAX_REASON_CHARS = 500


def dlq_schema() -> Schema:
    """The dead-letter table: the key_value columns and why the value did not decode."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, StringType

    from pybroker.clients.iceberg.columns import key_value_schema

    base = key_value_schema()
    reason_id = base.highest_field_id + 1
    return Schema(*base.fields, NestedField(reason_id, REASON, StringType(), required=False))


@dataclass
class Split:
    decoded: dict[int, tuple[ValueDecoder, pa.Table, list[int]]] = field(default_factory=dict)
    dead: pa.Table | None = None


#: the group of tombstones (null values): the Kafka coordinates alone, every value column null
TOMBSTONE_GROUP = -1


def _tombstone(_: bytes) -> dict[str, Any]:
    return {}


def _decode(value: bytes | None, mode: str, schemas: RegistrySchemas,
            latest_id: int | None) -> tuple[ValueDecoder, dict[str, Any]]:
    if value is None:
        import pyarrow as pa

        return ValueDecoder(TOMBSTONE_GROUP, pa.schema([]), _tombstone), {}
    if mode == "value_schema_latest":
        if latest_id is None:
            raise NotDecodable("no schema is registered under the topic's value subject")
        schema_id, payload = latest_id, value
    else:
        schema_id, payload = schema_id_prefix(value)
    found = schemas.decoder(schema_id)
    decode = found.decode_unframed if mode == "value_schema_latest" and found.decode_unframed else found.decode
    try:
        return found, decode(payload)
    except Exception as exc:  # the decoders' complaints about bad bytes take many types
        raise NotDecodable(f"the value does not decode by schema id {schema_id}: "
                           f"{type(exc).__name__}: {exc}") from None


def split(rows: pa.Table, mode: str, schemas: RegistrySchemas, latest_id: int | None,
          keep_dead: bool) -> Split:
    """Decode `rows` (key_value rows): typed groups by schema id, and the dead-letter rows when `keep_dead`."""
    import pyarrow as pa

    groups: dict[int, tuple[ValueDecoder, list[int], list[dict[str, Any]]]] = {}
    dead_rows: list[int] = []
    reasons: list[str] = []
    for index, value in enumerate(rows.column("value").to_pylist()):
        try:
            found, row = _decode(value, mode, schemas, latest_id)
        except NotDecodable as exc:
            dead_rows.append(index)
            reasons.append(str(exc)[:MAX_REASON_CHARS])
            continue
        group = groups.setdefault(found.schema_id, (found, [], []))
        group[1].append(index)
        group[2].append(row)
    out = Split()
    kafka = rows.column("kafka")
    for schema_id, (found, indexes, values) in sorted(groups.items()):
        try:
            struct = pa.array(values, type=pa.struct(list(found.arrow_fields))) if len(found.arrow_fields) else None
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            dead_rows += indexes
            reasons += [f"schema id {schema_id}: the values do not fit its columns: {exc}"[:MAX_REASON_CHARS]] * len(indexes)
            continue
        columns = [kafka.take(indexes).combine_chunks(), *(struct.flatten() if struct is not None else [])]
        schema = pa.schema([rows.schema.field("kafka"), *found.arrow_fields])
        out.decoded[schema_id] = (found, pa.Table.from_arrays(columns, schema=schema), indexes)
    if keep_dead and dead_rows:
        order = sorted(range(len(dead_rows)), key=dead_rows.__getitem__)
        taken = rows.take([dead_rows[i] for i in order])
        out.dead = taken.append_column(REASON, pa.array([reasons[i] for i in order], pa.string()))
    return out


def in_range(rows: pa.Table, partition_floor: dict[int, int]) -> pa.Table:
    """The rows whose offset is at or past their partition's floor (rows a table already holds are dropped)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not partition_floor or rows.num_rows == 0:
        return rows
    kafka = rows.column("kafka")
    partitions = pc.struct_field(kafka, "partition")
    offsets = pc.struct_field(kafka, "offset")
    keep = pa.array([True] * rows.num_rows)
    for partition, floor in partition_floor.items():
        keep = pc.and_(keep, pc.or_(pc.not_equal(partitions, partition), pc.greater_equal(offsets, floor)))
    return rows.filter(keep)
