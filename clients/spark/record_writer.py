"""Writing DataFrame rows as records, with Spark's Kafka sink rules; the at-least-once write.

Columns (checked on the driver against the DataFrame's schema, before any task runs):
`value` (string or binary, required), `key` (string or binary), `topic` (string; the `topic` option
overrides it, and one of the two is required), `partition` (int; null lets the client's partitioner
choose: murmur2 of the key like Java's, in both writes), `headers`
(array<struct<key:string,value:binary>>). Other columns are ignored, as Spark's sink ignores them.

Delivery here (`write_rows`, with kafka-python): a task sends its rows, flushes, and fails if any send
failed, so Spark retries the task; a retried task sends its rows again. That is at-least-once, exactly as
Spark's own Kafka sink, and what the sink does when the broker cannot do two-phase commit or
`exactlyOnce=false`. The exactly-once write is `exactly_once.write_task`; both read rows with `row_record`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.clients.spark.offsets import OptionError
from pybroker.clients.spark.options import WriteOptions
from pybroker.clients.spark.reachability import require_a_broker

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

FLUSH_TIMEOUT_S = 120.0


def _type_names() -> dict[str, tuple[str, ...]]:
    """Column -> the Spark simple type names it may have."""
    return {"value": ("string", "binary"), "key": ("string", "binary"), "topic": ("string",),
            "partition": ("int",), "headers": ("array<struct<key:string,value:binary>>",)}


@dataclass(frozen=True, slots=True)
class Columns:
    """Which of the sink's columns the DataFrame has (so each task looks them up by name, never guesses)."""

    has_key: bool
    has_topic: bool
    has_partition: bool
    has_headers: bool


def check_columns(schema: StructType, options: WriteOptions) -> Columns:
    """Refuse, with a message, a DataFrame the sink cannot write."""
    fields: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    allowed = _type_names()
    if "value" not in fields:
        raise OptionError(f"the DataFrame written to pybroker needs a 'value' column (string or binary); "
                          f"it has {', '.join(fields) or 'no columns'}")
    if options.topic is None and "topic" not in fields:
        raise OptionError("set the 'topic' option or give the DataFrame a 'topic' column (string)")
    for name, types in allowed.items():
        if name in fields and fields[name].simpleString() not in types:
            raise OptionError(f"column {name!r} must be of type {' or '.join(types)}, "
                              f"not {fields[name].simpleString()}")
    return Columns(has_key="key" in fields, has_topic="topic" in fields,
                   has_partition="partition" in fields, has_headers="headers" in fields)


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


Headers = list[tuple[str, bytes | None]]


def row_record(row: Any, options: WriteOptions, columns: Columns) -> tuple[str, int | None, bytes | None,
                                                                           bytes | None, Headers]:
    """(topic, partition or None, key, value, headers) of one row, by the sink's column rules."""
    topic = options.topic or (row["topic"] if columns.has_topic else None)
    if topic is None:
        raise ValueError("a row has a null 'topic' and no 'topic' option is set")
    key = _as_bytes(row["key"]) if columns.has_key else None
    value = _as_bytes(row["value"])
    if key is None and value is None:
        raise ValueError(f"a row for topic {topic!r} has neither key nor value; the client cannot send it")
    partition = row["partition"] if columns.has_partition else None
    headers = [(h["key"], _as_bytes(h["value"])) for h in (row["headers"] or ())] if columns.has_headers else []
    return topic, partition, key, value, headers


def write_rows(rows: Iterable[Any], options: WriteOptions, columns: Columns) -> int:
    """Send every row, flush, and raise if any record was not acknowledged. Returns the number sent."""
    from kafka import KafkaProducer

    settings: dict[str, Any] = {"acks": "all", "request_timeout_ms": 30_000, "max_block_ms": 60_000,
                                "reconnect_backoff_max_ms": 1000, "linger_ms": 5, **options.producer_config}
    require_a_broker(options.bootstrap_servers)  # a stopped broker fails the task in seconds
    producer = KafkaProducer(bootstrap_servers=list(options.bootstrap_servers), **settings)
    failures: list[BaseException] = []
    sent = 0
    try:
        for row in rows:
            if failures:
                break
            topic, partition, key, value, headers = row_record(row, options, columns)
            try:
                future = producer.send(topic, key=key, value=value, partition=partition, headers=headers or None)
            except Exception as exc:
                where = f"{topic}" if partition is None else f"{topic}-{partition}"
                raise RuntimeError(f"could not send a record to {where}: {exc!r}") from exc
            future.add_errback(failures.append)
            sent += 1
        try:
            producer.flush(timeout=FLUSH_TIMEOUT_S)
        except Exception as exc:  # the client's own complaint; the records' errors (if any) say more
            if not failures:
                failures.append(exc)
    finally:
        producer.close(timeout=10)
    if failures:
        raise RuntimeError(f"{len(failures)} record(s) were not acknowledged by the broker; failing the task so "
                           f"Spark retries it (at-least-once). First error: {failures[0]!r}")
    return sent
