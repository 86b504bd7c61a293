"""Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10) against a real pybroker.

What a Spark user tries first, beside our `format("pybroker")`: batch write and read, headers, start by
timestamp, read_committed, minPartitions, and a streaming query from one topic to another with a checkpoint
that restarts exactly where it left off. The connector's jars come from `make spark-kafka` (a cache outside
the tree) and sit on the shared Spark session's class path (conftest.py); the connector is Spark's, the
Kafka client inside it is the one Spark ships with it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession

from tests.integration.brokers import BrokerProcess
from tests.integration.spark.spark_kafka import spark_kafka_home, spark_kafka_jars
from tests.integration.spark.support import create_topic

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _connector() -> None:
    if not spark_kafka_jars():
        reason = f"Spark's Kafka connector is not resolved in {spark_kafka_home()}: `make spark-kafka`"
        if os.environ.get("PYBROKER_KAFKA_HOME"):  # under `make test`, which resolves it: a failure
            pytest.fail(reason)
        pytest.skip(reason)


def _kafka(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _strings(df: DataFrame) -> list[tuple[str, str]]:
    rows = df.selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "partition", "offset")
    return [(r.k, r.v) for r in rows.orderBy("partition", "offset").collect()]


def test_batch_write_then_read_with_headers(spark: SparkSession, broker: BrokerProcess,
                                            new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 2)
    rows = [(f"k{i}", f"v{i}", i % 2) for i in range(60)]
    df = spark.createDataFrame(rows, "key string, value string, partition int").selectExpr(
        "key", "value", "partition", "array(named_struct('key', 'n', 'value', CAST(value AS BINARY))) AS headers")
    df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic) \
        .option("includeHeaders", "true").save()
    got = _kafka(spark, broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert sorted(_strings(got)) == sorted((k, v) for k, v, _ in rows)
    assert sorted(r.partition for r in got.select("partition").distinct().collect()) == [0, 1]
    headers = got.selectExpr("CAST(value AS STRING) AS v", "CAST(headers[0].value AS STRING) AS h").collect()
    assert all(r.v == r.h for r in headers) and len(headers) == 60
    # offsets are dense per partition, as the connector checks when it plans its ranges
    for part in (0, 1):
        offsets = sorted(r.offset for r in got.where(f"partition = {part}").select("offset").collect())
        assert offsets == list(range(30))


def test_starting_offsets_by_timestamp_and_min_partitions(spark: SparkSession, broker: BrokerProcess,
                                                          new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 100_000
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", timestamp=base + i * 1000)
    producer.flush(30)
    since = _kafka(spark, broker.bootstrap, subscribe=topic,
                   startingOffsetsByTimestamp=f'{{"{topic}": {{"0": {base + 25_000}}}}}')
    assert [k for k, _ in _strings(since)] == [f"k{i}" for i in range(25, 40)]
    split = _kafka(spark, broker.bootstrap, subscribe=topic, minPartitions="4")
    assert split.rdd.getNumPartitions() >= 4 and split.count() == 40


def test_read_committed_skips_aborted_transactions(spark: SparkSession, broker: BrokerProcess,
                                                   new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(30)
    for outcome, prefix in (("commit", "a"), ("abort", "x"), ("commit", "b")):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, key=f"{prefix}{i}", value=prefix)
        producer.flush(30)
        producer.commit_transaction(30) if outcome == "commit" else producer.abort_transaction(30)
    committed = _kafka(spark, broker.bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    assert [k for k, _ in _strings(committed)] == [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)]
    everything = _kafka(spark, broker.bootstrap, subscribe=topic)
    assert len(_strings(everything)) == 15


def test_streaming_query_restarts_from_its_checkpoint(spark: SparkSession, broker: BrokerProcess,
                                                      new_topic: Callable[..., str], tmp_path: Path) -> None:
    source, sink = new_topic("in"), new_topic("out")
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, sink, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def produce(start: int, stop: int) -> None:
        for i in range(start, stop):
            producer.produce(source, key=f"k{i}", value=f"v{i}", partition=i % 2)
        producer.flush(30)

    def run_once() -> None:
        stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", source).option("startingOffsets", "earliest").load()
                  .selectExpr("key", "upper(CAST(value AS STRING)) AS value"))
        query = (stream.writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                 .option("topic", sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        assert query.exception() is None

    produce(0, 50)
    run_once()
    produce(50, 80)
    run_once()  # the second run reads only what came after the checkpoint's offsets
    out = _kafka(spark, broker.bootstrap, subscribe=sink)
    values = sorted(v for _, v in _strings(out))
    assert values == sorted(f"V{i}" for i in range(80))  # each record once: nothing read twice or lost
