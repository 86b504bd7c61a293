"""The exactly-once sink with real Spark and a real broker: a task that dies after writing is retried, a
micro-batch is re-run after its commit, and a read_committed reader still sees every row exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import TopicPartition
from pyspark.sql import DataFrame, SparkSession

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_consumer, kp_producer
from tests.integration.spark.support import create_topic, read, read_stream, run_to_end

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUERY_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that allows two-phase commit (Kafka's default, and pybroker's, is not to)."""
    proc = BrokerProcess(tmp_path_factory.mktemp("broker"), {"transaction.two.phase.commit.enable": "true"})
    proc.start()
    try:
        yield proc
    finally:
        if proc.is_running():
            proc.stop(expect_code=0)
        proc.close()


def _values(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int,
            wait_s: float = 30.0) -> list[bytes]:
    """Every value in `topic` under `isolation`, read until `expected` arrived or nothing more comes (a check
    that nothing is visible passes a short `wait_s`: records that are there arrive within a second)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    got: list[bytes] = []
    with kp_consumer(bootstrap, isolation_level=isolation) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning()
        deadline, quiet_until = time.monotonic() + wait_s, time.monotonic() + min(3.0, wait_s)
        while time.monotonic() < deadline and (len(got) < expected or time.monotonic() < quiet_until):
            polled = consumer.poll(timeout_ms=300)
            for records in polled.values():
                got += [r.value for r in records]
            if len(got) >= expected and not polled:
                break
    return sorted(got)


def _write(df: DataFrame, bootstrap: str, **options: str) -> None:
    writer = df.write.format("pybroker").option("kafka.bootstrap.servers", bootstrap).mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_a_retried_task_does_not_duplicate_what_its_first_attempt_wrote(
        spark: SparkSession, broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 3)
    rows = [(f"k{i}", f"v{i}") for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(3)
    # attempt 0 of Spark partition 1 sends its rows, then dies; attempt 1 takes the same transactional id
    _write(df, broker.bootstrap, topic=topic, **{"exactlyOnce.failOnceAfterWrite": "1"})

    expected = sorted(v.encode() for _, v in rows)
    assert _values(broker.bootstrap, topic, 3, "read_committed", len(rows)) == expected
    # the dead attempt's rows are in the log, aborted: a read_uncommitted reader sees them twice
    uncommitted = _values(broker.bootstrap, topic, 3, "read_uncommitted", len(rows) + 1)
    assert len(uncommitted) > len(rows) and set(uncommitted) == set(expected)
    # the connector's own reader is read_committed by default; read_uncommitted shows the aborted rows too
    assert sorted(bytes(r.value) for r in read(spark, broker.bootstrap, subscribe=topic).collect()) == expected
    dirty = read(spark, broker.bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_uncommitted"})
    assert sorted(bytes(r.value) for r in dirty.collect()) == uncommitted
    # keys land where Kafka's default partitioner puts them: one key, one partition
    partitions_of: dict[bytes, set[int]] = {}
    for r in read(spark, broker.bootstrap, subscribe=topic).collect():
        partitions_of.setdefault(bytes(r.key), set()).add(r.partition)
    assert all(len(p) == 1 for p in partitions_of.values())


def test_a_failed_write_leaves_nothing_visible(spark: SparkSession, broker: BrokerProcess,
                                               new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 2)
    df = spark.createDataFrame([("v", 0 if i < 5 else 7) for i in range(10)], "value string, partition int")
    with pytest.raises(Exception, match=f"could not send a record to {topic}-7"):
        _write(df.repartition(2), broker.bootstrap, topic=topic, exactlyOnce="true")
    assert _values(broker.bootstrap, topic, 2, "read_committed", 1, wait_s=3) == []


def _finish(start) -> None:  # type: ignore[no-untyped-def]
    query = run_to_end(start, QUERY_TIMEOUT_S)
    assert query.exception() is None, query.exception()


def test_a_micro_batch_rerun_after_its_commit_writes_nothing_twice(
        spark: SparkSession, broker: BrokerProcess, new_topic: Callable[..., str], tmp_path: Path) -> None:
    source, sink = new_topic("in"), new_topic("out")
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, sink, 2)
    checkpoint = tmp_path / "checkpoint"

    def produce(first: int, count: int) -> None:
        with kp_producer(broker.bootstrap) as producer:
            for i in range(first, first + count):
                producer.send(source, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
            producer.flush(timeout=20)

    def run(**options: str) -> None:
        stream = read_stream(spark, broker.bootstrap, subscribe=source, startingOffsets="earliest",
                             maxOffsetsPerTrigger="20")
        writer = (stream.selectExpr("key", "value").repartition(2).writeStream.format("pybroker")
                  .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", sink)
                  .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
        for key, value in options.items():
            writer = writer.option(key, value)
        _finish(writer.start)

    produce(0, 50)
    run(**{"exactlyOnce.failOnceAfterWrite": "0"})  # every batch's partition 0 dies once after writing
    assert _values(broker.bootstrap, sink, 2, "read_committed", 50) == sorted(f"v{i}".encode() for i in range(50))
    assert len(_values(broker.bootstrap, sink, 2, "read_uncommitted", 51)) > 50, "the first attempts wrote"

    # the driver "died" after the sink committed the last batch, before Spark wrote its commit log entry:
    # the restarted query runs that batch again, and its tasks find it committed
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = commits[-1]
    assert last.name.isdigit()
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    produce(50, 10)
    run()
    assert _values(broker.bootstrap, sink, 2, "read_committed", 60) == sorted(f"v{i}".encode() for i in range(60))
