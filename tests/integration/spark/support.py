"""Helpers the Spark tests share: topics, a reader with the broker's address, rows as plain tuples, and
streaming queries started again when Spark's own fixed start-up wait runs out on a loaded machine."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka.admin import NewTopic
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

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



#: a streaming source's planner is a Python process Spark starts per query and waits for a fixed 10 s (no
#: setting changes it) to connect back; a loaded machine takes longer to start it, and the query fails
#: while it initializes, before it has read or committed anything, so starting it again is safe
WORKER_LATE = "Python worker failed to connect back"
START_TRIES = 5


def _worker_was_late(query: StreamingQuery, exc: BaseException | None, checkpoint: Path | None) -> bool:
    """The query failed only because its Python worker was late; its checkpoint is made ready for another
    start: the failed one left an empty offsets folder, which a memory sink refuses to recover from."""
    if exc is None or WORKER_LATE not in str(exc) or query.recentProgress:
        return False
    offsets = None if checkpoint is None else checkpoint / "offsets"
    if offsets is not None and offsets.is_dir() and not any(p.name[0].isdigit() for p in offsets.iterdir()):
        for stray in offsets.iterdir():
            stray.unlink()
        offsets.rmdir()
    return True


def run_to_end(start: Callable[[], StreamingQuery], timeout_s: float,
               checkpoint: Path | None = None) -> StreamingQuery:
    """Start a query (an availableNow one) and wait until it has finished; started again (up to
    START_TRIES times) when Spark gave up on its Python worker while initializing. Stopped either way."""
    for attempt in range(1, START_TRIES + 1):
        query = start()
        try:
            finished = query.awaitTermination(timeout_s)
        except StreamingQueryException as exc:
            if attempt < START_TRIES and _worker_was_late(query, exc, checkpoint):
                continue
            raise
        finally:
            query.stop()
        assert finished, f"the query did not finish within {timeout_s:.0f} s"
        return query
    raise AssertionError("unreachable")


def start_running(start: Callable[[], StreamingQuery], timeout_s: float,
                  checkpoint: Path | None = None) -> StreamingQuery:
    """Start a continuous query and wait for its first progress; started again (up to START_TRIES
    times) when Spark gave up on its Python worker while initializing. The caller stops it."""
    for attempt in range(1, START_TRIES + 1):
        query = start()
        deadline = time.monotonic() + timeout_s
        while not query.recentProgress and query.isActive and time.monotonic() < deadline:
            time.sleep(0.2)
        if query.recentProgress:
            return query
        failure = None if query.isActive else query.exception()
        query.stop()
        if attempt < START_TRIES and _worker_was_late(query, failure, checkpoint):
            continue
        raise AssertionError(f"the query made no progress within {timeout_s:.0f} s: {failure}")
    raise AssertionError("unreachable")
