"""Helpers the Spark tests share: topics, a reader with the broker's address, rows as plain tuples."""

from __future__ import annotations

from typing import Any

from kafka.admin import NewTopic
from pyspark.sql import DataFrame, SparkSession

from tests.integration.clients import kp_admin, kp_wait_for_topic

Row = tuple[Any, ...]


def create_topic(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    with kp_admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    kp_wait_for_topic(bootstrap, topic)


def read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format("pybroker").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def read_stream(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.readStream.format("pybroker").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def plain_rows(df: DataFrame) -> list[Row]:
    """(key, value, topic, partition, offset, timestamp ms, timestampType[, headers]) sorted by partition, offset.

    Timestamps as epoch milliseconds, so nothing depends on the Python process's time zone.
    """
    has_headers = "headers" in df.columns
    rows = df.selectExpr("*", "unix_millis(timestamp) AS ts_ms").collect()
    out = []
    for r in rows:
        row: Row = (_bytes(r.key), _bytes(r.value), r.topic, r.partition, r.offset, r.ts_ms, r.timestampType)
        if has_headers:
            row += (None if r.headers is None else [(h.key, _bytes(h.value)) for h in r.headers],)
        out.append(row)
    return sorted(out, key=lambda row: (row[2], row[3], row[4]))

