"""The columns of a topic's Iceberg table, and Kafka records turned into rows of it.

The layout is Redpanda's, so queries written for Redpanda's Iceberg topics read ours: one struct column
`kafka` with the record's coordinates (partition, offset, timestamp, headers, key), then the value. In
`key_value` mode the value is one binary column `value`; the decoding modes (`value_decoders.py`) put the
value's own fields there instead, which is why the coordinates live in a struct of their own (a value
field named `offset` cannot collide with them).

Rows come from `ColumnBuilder` (the Spark connector's record decoder, `clients/spark/arrow_records.py`):
its buffers become Arrow arrays without a Python object per record. Timestamps are UTC microseconds
(`timestamptz`), as the builder already gives them.

Pure functions: any thread may call them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

#: the field ids of the key_value schema (a table made by an older version keeps its own; names are looked up)
KAFKA, VALUE, PARTITION, OFFSET, TIMESTAMP, HEADERS, HEADER, HEADER_KEY, HEADER_VALUE, KEY = range(1, 11)
PARTITION_FIELD_ID = 1000

#: iceberg.partition.spec -> the transform of the record timestamp (None: unpartitioned)
SPEC_TRANSFORMS: dict[str, str | None] = {"(hour(timestamp))": "hour", "(day(timestamp))": "day", "()": None}


def key_value_schema() -> Schema:
    """The key_value table: the Kafka coordinates, and the value as bytes."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    header = StructType(NestedField(HEADER_KEY, "key", StringType(), required=False),
                        NestedField(HEADER_VALUE, "value", BinaryType(), required=False))
    kafka = StructType(
        NestedField(PARTITION, "partition", IntegerType(), required=True),
        NestedField(OFFSET, "offset", LongType(), required=True),
        NestedField(TIMESTAMP, "timestamp", TimestamptzType(), required=True),
        NestedField(HEADERS, "headers", ListType(HEADER, header, element_required=True), required=False),
        NestedField(KEY, "key", BinaryType(), required=False))
    return Schema(NestedField(KAFKA, "kafka", kafka, required=True),
                  NestedField(VALUE, "value", BinaryType(), required=False))


def partition_spec(schema: Schema, spec_text: str) -> PartitionSpec:
    """The table's partitioning from the topic's `iceberg.partition.spec`."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform, HourTransform

    transform = SPEC_TRANSFORMS[spec_text]
    if transform is None:
        return UNPARTITIONED_PARTITION_SPEC
    source = schema.find_field("kafka.timestamp").field_id
    made = {"hour": HourTransform, "day": DayTransform}[transform]()
    return PartitionSpec(PartitionField(source_id=source, field_id=PARTITION_FIELD_ID, transform=made,
                                        name=f"timestamp_{transform}"))


def _buffers(*raw: bytes | None) -> list[Any]:
    import pyarrow as pa

    return [None if b is None else pa.py_buffer(b) for b in raw]


def _binary(rows: int, column: tuple[bytes | None, int, bytes, bytes], kind: Any = None) -> pa.Array:
    import pyarrow as pa

    valid, nulls, offsets, data = column
    return pa.Array.from_buffers(kind or pa.binary(), rows, _buffers(valid, offsets, data), null_count=nulls)


def key_value_rows(columns: tuple[Any, ...], partition: int, schema: pa.Schema) -> pa.Table:
    """The rows of one builder's `finish()` (a `ColumnBuilder(headers=True)`) in the table's Arrow schema."""
    import pyarrow as pa

    rows, offsets, timestamps, _types, key, value, headers = columns
    kafka_type = schema.field("kafka").type
    headers_type = kafka_type.field("headers").type
    lists, list_nulls, list_offsets, header_keys, header_values = headers
    entries = len(header_keys[2]) // 4 - 1  # int32 offsets: one more than the entries
    entry = pa.StructArray.from_arrays([_binary(entries, header_keys, pa.string()), _binary(entries, header_values)],
                                       names=["key", "value"])
    header_lists = pa.Array.from_buffers(pa.list_(pa.field("element", entry.type, nullable=False)), rows,
                                         _buffers(lists, list_offsets), null_count=list_nulls, children=[entry])
    kafka = pa.StructArray.from_arrays(
        [pa.repeat(pa.scalar(partition, pa.int32()), rows),
         pa.Array.from_buffers(pa.int64(), rows, _buffers(None, offsets)),
         pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), rows, _buffers(None, timestamps)),
         header_lists.cast(headers_type),
         _binary(rows, key).cast(kafka_type.field("key").type)],
        fields=list(kafka_type))
    return pa.Table.from_arrays([kafka, _binary(rows, value).cast(schema.field("value").type)], schema=schema)
