"""The rows the connector reads and writes: Spark's Kafka schema, and records turned into Arrow batches.

Why Arrow: a Python data source that yields `pyarrow.RecordBatch`es skips Spark's per-row conversion;
Spark checks each batch's Arrow schema against the declared one, so the batches are built from the very
schema Spark derives (`to_arrow_schema(..., timezone="UTC")`), never a hand-written copy of it.

The read schema is Spark's Kafka source schema, column for column: key binary, value binary, topic string,
partition int, offset long, timestamp timestamp, timestampType int, and with includeHeaders
`headers array<struct<key:string,value:binary>>` (null for a record without headers).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from kafka.consumer.fetcher import ConsumerRecord
    from pyspark.sql.types import StructType

@cache
def read_schema(include_headers: bool) -> StructType:
    """The read schema (the columns above), built as types, not DDL: workers have no JVM to parse DDL with."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


@cache
def arrow_schema(include_headers: bool) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(read_schema(include_headers), timezone="UTC")


def to_record_batch(records: Sequence[ConsumerRecord], include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch of `records`, columns in schema order; Kafka's millisecond timestamps become UTC."""
    import pyarrow as pa

    schema = arrow_schema(include_headers)
    columns = [
        [r.key for r in records],
        [r.value for r in records],
        [r.topic for r in records],
        [r.partition for r in records],
        [r.offset for r in records],
        [r.timestamp * 1000 for r in records],  # Spark's timestamps are microseconds
        [r.timestamp_type for r in records],
    ]
    if include_headers:
        columns.append([[{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in records])
    arrays = [pa.array(values, type=schema.field(i).type) for i, values in enumerate(columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
