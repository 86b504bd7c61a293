"""What the decoder tests share: both builders, rows out of an Arrow batch, and kafka-python as the oracle."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from kafka.record.memory_records import MemoryRecords

from pybroker.clients.spark import arrow_records, arrow_records_py
from pybroker.clients.spark.arrow_records import to_record_batch
from pybroker.clients.spark.record_set import Walked, walk

#: the compiled builder when it is built, and always the pure-Python one
BUILDERS: dict[str, Any] = {"pure": arrow_records_py.ColumnBuilder}
if arrow_records.IMPLEMENTATION.startswith("compiled"):
    BUILDERS["compiled"] = arrow_records.ColumnBuilder

TOPIC, PARTITION = "events", 3
Row = tuple[Any, ...]


def rows_of(batch: pa.RecordBatch, *, with_place: bool = False) -> list[Row]:
    """(key, value, offset, timestamp ms, timestamp type[, headers]) per row, after (topic, partition) when
    `with_place`, else with topic and partition checked to be the kit's."""
    batch.validate(full=True)
    if not with_place:
        assert set(batch.column(2).to_pylist()) <= {TOPIC} and set(batch.column(3).to_pylist()) <= {PARTITION}
    micros = batch.column(5).cast(pa.int64()).to_pylist()
    columns = [batch.column(0).to_pylist(), batch.column(1).to_pylist(), batch.column(4).to_pylist(),
               [m // 1000 for m in micros], batch.column(6).to_pylist()]
    if with_place:
        columns[:0] = [batch.column(2).to_pylist(), batch.column(3).to_pylist()]
    if batch.num_columns > 7:
        columns.append([None if h is None else [(e["key"], e["value"]) for e in h]
                        for h in batch.column(7).to_pylist()])
    assert all(m % 1000 == 0 for m in micros)
    return list(zip(*columns, strict=True))


def decode(builder_cls: Any, record_set: bytes, *, headers: bool = True, position: int = 0, end: int = 2**62,
           read_committed: bool = False, aborted: list[tuple[int, int]] | None = None,
           check_crcs: bool = True) -> tuple[list[Row], Walked]:
    builder = builder_cls(headers)
    walked = walk(record_set, builder, name=f"{TOPIC}-{PARTITION}", position=position, end=end,
                  read_committed=read_committed, aborted=aborted, check_crcs=check_crcs)
    assert builder.rows == walked.rows
    return rows_of(to_record_batch(builder.finish(), TOPIC, PARTITION, headers)), walked


def oracle(record_set: bytes, *, headers: bool = True, position: int = 0, end: int = 2**62) -> list[Row]:
    """kafka-python's reading of the same bytes (read_uncommitted: control batches dropped, nothing else)."""
    out: list[Row] = []
    records = MemoryRecords(bytes(record_set))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        if batch.is_control_batch:
            continue
        for r in batch:
            if not position <= r.offset < end:
                continue
            row: Row = (r.key, r.value, r.offset, r.timestamp, r.timestamp_type)
            if headers:
                row += ([(k, v) for k, v in r.headers] or None,)
            out.append(row)
    return out
