"""Helpers the Spark tests share: topics, a reader with the broker's address, rows as plain tuples."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka.admin import NewTopic
from pyspark.sql import DataFrame, SparkSession

from tests.integration.clients import kp_admin, kp_wait_for_topic

Row = tuple[Any, ...]
DELETE_RECORDS_API_KEY = 21


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


def advertised_api_keys(host: str, port: int) -> set[int]:
    """The API keys the broker answers, from a hand-built ApiVersions v0 round trip."""
    body = struct.pack(">hhih", 18, 0, 7, 5) + b"tests"
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        payload = _recv(sock, size)
    _, error, count = struct.unpack_from(">ihi", payload)
    assert error == 0, f"ApiVersions error {error}"
    return {struct.unpack_from(">h", payload, 10 + 6 * i)[0] for i in range(count)}


def _recv(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed early")
        data += chunk
    return bytes(data)

