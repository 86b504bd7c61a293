"""`spark.readStream.format("pybroker")`: bounded micro-batches, checkpoints, new partitions, latest starts."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kafka.admin import NewPartitions
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_admin, kp_producer, kp_wait_for_topic
from tests.integration.spark.support import create_topic, read_stream, run_to_end, start_running

QUERY_TIMEOUT_S = 240  # polled: a few seconds idle, minutes on a loaded machine


def _produce(bootstrap: str, topic: str, counts: dict[int, int], tag: str) -> set[bytes]:
    """`counts[p]` records into partition p; returns their values (unique, so duplicates show)."""
    values = set()
    with kp_producer(bootstrap, linger_ms=5) as producer:
        for partition, count in counts.items():
            for i in range(count):
                value = f"{tag}-{partition}-{i}".encode()
                producer.send(topic, key=f"k{i % 7}".encode(), value=value, partition=partition)
                values.add(value)
        producer.flush(timeout=20)
    return values


def _finish(start: Callable[[], StreamingQuery], checkpoint: Path) -> StreamingQuery:
    return run_to_end(start, QUERY_TIMEOUT_S, checkpoint)


def test_available_now_reads_everything_in_bounded_batches(spark: SparkSession, broker: BrokerProcess,
                                                           new_topic: Callable[..., str], tmp_path: Path) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 3)
    sent = _produce(broker.bootstrap, topic, {0: 60, 1: 30, 2: 10}, "a")
    stream = read_stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest",
                         maxOffsetsPerTrigger="15")
    query = _finish(lambda: stream.writeStream.format("memory").queryName("bounded_batches")
                    .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start(),
                    tmp_path / "checkpoint")

    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(batches) == 100 and max(batches) <= 15 and len(batches) >= 7, batches
    rows = spark.table("bounded_batches").select("value", "partition", "offset").collect()
    assert {bytes(r.value) for r in rows} == sent and len(rows) == 100
    assert len({(r.partition, r.offset) for r in rows}) == 100
    last = query.recentProgress[-1]["sources"][0]["endOffset"]
    assert last == f'{{"{topic}": {{"0": 60, "1": 30, "2": 10}}}}', "offsets are Spark's JSON, keys sorted"


def test_restart_from_a_checkpoint_reads_each_record_once(spark: SparkSession, broker: BrokerProcess,
                                                          new_topic: Callable[..., str], tmp_path: Path) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 2)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def run() -> None:
        stream = read_stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest",
                             maxOffsetsPerTrigger="20")
        _finish(lambda: stream.select("value", "partition", "offset").writeStream.format("parquet")
                .option("path", str(sink)).option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True).start(), checkpoint)

    sent = _produce(broker.bootstrap, topic, {0: 30, 1: 20}, "first")
    run()
    # more data arrives, in the old partitions and in a new one (which the restart reads from its earliest)
    with kp_admin(broker.bootstrap) as admin:
        admin.create_partitions({topic: NewPartitions(total_count=3)})
    deadline = time.monotonic() + 10
    while kp_wait_for_topic(broker.bootstrap, topic) != {0, 1, 2} and time.monotonic() < deadline:
        time.sleep(0.1)
    sent |= _produce(broker.bootstrap, topic, {0: 5, 1: 10, 2: 15}, "second")
    run()
    run()  # nothing new: reads nothing

    rows = spark.read.parquet(str(sink)).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(sent), "every record exactly once"
    assert len({(r.partition, r.offset) for r in rows}) == len(rows) == 80


def test_a_new_query_starts_at_latest_by_default(spark: SparkSession, broker: BrokerProcess,
                                                 new_topic: Callable[..., str], tmp_path: Path) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 2)
    _produce(broker.bootstrap, topic, {0: 5, 1: 5}, "before")
    query = start_running(  # the start is fixed by the first batch
        lambda: read_stream(spark, broker.bootstrap, subscribe=topic).writeStream.format("memory")
        .queryName("from_latest").option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds").start(), QUERY_TIMEOUT_S, tmp_path / "checkpoint")
    try:
        after = _produce(broker.bootstrap, topic, {0: 3, 1: 4}, "after")
        query.processAllAvailable()
    finally:
        query.stop()
    assert {bytes(r.value) for r in spark.table("from_latest").collect()} == after
