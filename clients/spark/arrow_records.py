"""Record batches of Kafka into Arrow record batches of Spark's Kafka schema, with no Python object per record.

Why: a Spark task reads hundreds of thousands of records, and a client that builds an object per
record (kafka-python's ConsumerRecord, then a Python list per column for `pa.array`) spends most of
the read doing that. Here a `ColumnBuilder` decodes each batch's record bytes straight into Arrow's
buffers, and `to_record_batch` wraps those buffers with `pa.Array.from_buffers` (no copy).

`ColumnBuilder` is the C extension `_arrow_records` (built by setup.py) when it is there, else its
pure-Python twin `arrow_records_py` (PYBROKER_PURE_PYTHON=1 at install, or no C compiler);
`IMPLEMENTATION` says which. The topic and partition columns are one value repeated (`pa.repeat`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pybroker.clients.spark import arrow_records_py
from pybroker.clients.spark.schema import arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

ColumnBuilder: Any
try:  # by name, so that type checking is the same with and without the extension built
    ColumnBuilder = importlib.import_module("pybroker.clients.spark._arrow_records").ColumnBuilder
    IMPLEMENTATION = "compiled (C)"
except ImportError:  # not built: PYBROKER_PURE_PYTHON=1 at install, or no C compiler
    ColumnBuilder = arrow_records_py.ColumnBuilder
    IMPLEMENTATION = "pure Python"

__all__ = ["IMPLEMENTATION", "ColumnBuilder", "to_record_batch"]


def _buffers(*raw: bytes | None) -> list[Any]:
    import pyarrow as pa

    return [None if b is None else pa.py_buffer(b) for b in raw]


def _binary(kind: pa.DataType, rows: int, column: tuple[bytes | None, int, bytes, bytes]) -> pa.Array:
    import pyarrow as pa

    valid, nulls, offsets, data = column
    return pa.Array.from_buffers(kind, rows, _buffers(valid, offsets, data), null_count=nulls)


def to_record_batch(columns: tuple[Any, ...], topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch from a builder's `finish()`, columns in the order and types Spark expects."""
    import pyarrow as pa

    schema = arrow_schema(include_headers)
    rows, offsets, timestamps, types, key, value, headers = columns
    arrays = [
        _binary(schema.field("key").type, rows, key),
        _binary(schema.field("value").type, rows, value),
        pa.repeat(pa.scalar(topic, schema.field("topic").type), rows),
        pa.repeat(pa.scalar(partition, schema.field("partition").type), rows),
        pa.Array.from_buffers(schema.field("offset").type, rows, _buffers(None, offsets)),
        pa.Array.from_buffers(schema.field("timestamp").type, rows, _buffers(None, timestamps)),
        pa.Array.from_buffers(schema.field("timestampType").type, rows, _buffers(None, types)),
    ]
    if include_headers:
        list_type = schema.field("headers").type
        entry_type = list_type.value_type
        lists, list_nulls, list_offsets, header_keys, header_values = headers
        entries = len(header_keys[2]) // 4 - 1  # int32 offsets: one more than the entries
        struct = pa.StructArray.from_arrays(
            [_binary(entry_type.field("key").type, entries, header_keys),
             _binary(entry_type.field("value").type, entries, header_values)],
            fields=[entry_type.field("key"), entry_type.field("value")])
        arrays.append(pa.Array.from_buffers(list_type, rows, _buffers(lists, list_offsets), null_count=list_nulls,
                                            children=[struct]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
