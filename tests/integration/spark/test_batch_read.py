"""`spark.read.format("pybroker")` against a real broker: what a stock client reads, bounded as asked."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kafka import TopicPartition
from pyspark.sql import SparkSession

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_producer, kp_read
from tests.integration.conftest import BrokerFactory
from tests.integration.spark.support import create_topic, plain_rows, read

SCHEMA = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
          "timestampType:int>")
HEADERS = "headers:array<struct<key:string,value:binary>>"


def _produce_mix(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    """Null keys, null and empty values, headers on some records, explicit and producer-set timestamps."""
    base = int(time.time() * 1000) - 60_000
    with kp_producer(bootstrap, linger_ms=5) as producer:
        for i in range(count):
            key = None if i % 4 == 0 else f"key-{i}".encode()
            value = None if i % 7 == 3 and key is not None else (b"" if i % 5 == 0 else f"value-{i}".encode())
            headers = [("h", str(i).encode()), ("ünï", b"\x00\xff"), ("h", b"")] if i % 3 == 0 else []
            producer.send(topic, key=key, value=value, headers=headers, partition=i % partitions,
                          timestamp_ms=base + i if i % 2 else None)
        producer.flush(timeout=20)


def test_batch_read_equals_a_direct_client_read(spark: SparkSession, broker: BrokerProcess,
                                                new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 3)
    _produce_mix(broker.bootstrap, topic, 3, 90)
    direct = kp_read(broker.bootstrap, topic, 3, 90)
    expected = sorted(((r.key, r.value, r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type,
                        [(k, v) for k, v in r.headers] or None) for r in direct), key=lambda t: (t[3], t[4]))
    assert len(expected) == 90

    with_headers = read(spark, broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert with_headers.schema.simpleString() == SCHEMA[:-1] + "," + HEADERS + ">"
    assert plain_rows(with_headers) == expected

    without = read(spark, broker.bootstrap, subscribe=topic)
    assert without.schema.simpleString() == SCHEMA
    assert plain_rows(without) == [row[:-1] for row in expected]


def test_offset_bounds_per_partition_with_earliest_and_latest(spark: SparkSession, broker: BrokerProcess,
                                                              new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 3)
    _produce_mix(broker.bootstrap, topic, 3, 30)  # 10 records per partition
    df = read(spark, broker.bootstrap, subscribe=topic,
              startingOffsets=f'{{"{topic}": {{"0": 2, "1": -2, "2": 9}}}}',
              endingOffsets=f'{{"{topic}": {{"0": 5, "1": -1, "2": 10}}}}')
    got = {(p, o) for (_, _, _, p, o, *_) in plain_rows(df)}
    assert got == {(0, 2), (0, 3), (0, 4), *((1, o) for o in range(10)), (2, 9)}


def test_starting_offsets_must_name_every_partition(spark: SparkSession, broker: BrokerProcess,
                                                    new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 2)
    df = read(spark, broker.bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 0}}}}')
    with pytest.raises(Exception, match=f"must give every subscribed partition: it does not name {topic}-1"):
        df.collect()


def test_timestamp_bounds(spark: SparkSession, broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 2)
    base = (int(time.time() * 1000) - 600_000) // 1000 * 1000
    with kp_producer(broker.bootstrap) as producer:
        for i in range(10):
            for p in (0, 1):
                producer.send(topic, value=f"{p}-{i}".encode(), partition=p, timestamp_ms=base + 1000 * i)
        producer.flush(timeout=20)

    def offsets(**options: str) -> set[tuple[int, int]]:
        return {(p, o) for (_, _, _, p, o, *_) in plain_rows(read(spark, broker.bootstrap, subscribe=topic, **options))}

    # a start at a timestamp is the first record at or after it; an end is exclusive the same way
    assert offsets(startingTimestamp=str(base + 4500), endingTimestamp=str(base + 7000)) == {
        (p, o) for p in (0, 1) for o in (5, 6)}
    per_partition = f'{{"{topic}": {{"0": {base + 8000}, "1": {base}}}}}'
    assert offsets(startingOffsetsByTimestamp=per_partition) == {(0, 8), (0, 9), *((1, o) for o in range(10))}
    # no record that recent: an end means the latest offset, a start fails unless told to start at the end
    assert len(offsets(endingTimestamp=str(base + 3_600_000))) == 20
    with pytest.raises(Exception, match="no record at or after the starting timestamp"):
        offsets(startingTimestamp=str(base + 3_600_000))
    assert offsets(startingTimestamp=str(base + 3_600_000), startingOffsetsByTimestampStrategy="latest") == set()


def test_min_partitions_pattern_and_assign_read_the_same_records(spark: SparkSession, broker: BrokerProcess,
                                                                 new_topic: Callable[..., str]) -> None:
    topic = new_topic("pat")
    create_topic(broker.bootstrap, topic, 2)
    _produce_mix(broker.bootstrap, topic, 2, 40)
    whole = plain_rows(read(spark, broker.bootstrap, subscribe=topic))
    split = read(spark, broker.bootstrap, subscribe=topic, minPartitions="8")
    assert split.rdd.getNumPartitions() >= 8
    assert plain_rows(split) == whole
    assert plain_rows(read(spark, broker.bootstrap, subscribePattern=topic.replace("-pat-", "-pa.-"))) == whole
    assigned = read(spark, broker.bootstrap, assign=f'{{"{topic}": [1]}}')
    assert plain_rows(assigned) == [row for row in whole if row[3] == 1]


def _compacted(bootstrap: str, topic: str, timeout: float = 30.0) -> None:
    """Write keys over and over until the cleaner leaves fewer records than offsets."""
    with kp_producer(bootstrap) as producer:
        for round_ in range(4):
            for k in range(5):
                producer.send(topic, key=f"k{k}".encode(), value=f"{round_}".encode(), partition=0)
            producer.flush(timeout=20)
            time.sleep(0.3)  # segment.ms is 200: each round lands in a segment of its own
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with kp_producer(bootstrap) as producer:  # a fresh append rolls the last full segment
            producer.send(topic, key=b"tick", value=b"", partition=0).get(timeout=10)
        records = kp_read(bootstrap, topic, 1, 10**6, timeout=1)
        offsets = [r.offset for r in records]
        if offsets and len(offsets) < offsets[-1] + 1 - offsets[0]:
            return
        time.sleep(0.5)
    pytest.fail(f"the cleaner did not compact {topic} within {timeout}s")


def test_offset_holes_of_a_compacted_topic_are_skipped(spark: SparkSession, broker_factory: BrokerFactory,
                                                       new_topic: Callable[..., str]) -> None:
    b = broker_factory({"log.cleaner.backoff.ms": "100"})
    topic = new_topic()
    create_topic(b.bootstrap, topic, 1, **{"cleanup.policy": "compact", "segment.ms": "200",
                                           "min.cleanable.dirty.ratio": "0.01"})
    _compacted(b.bootstrap, topic)
    offsets = [r.offset for r in kp_read(b.bootstrap, topic, 1, 10**6, timeout=2)]  # nothing appends now

    def read_offsets(**options: str) -> list[int]:
        return [o for (_, _, _, _, o, *_) in plain_rows(read(spark, b.bootstrap, subscribe=topic, **options))]

    assert read_offsets() == offsets
    hole = next(o for o in range(offsets[0], offsets[-1]) if o not in offsets)
    after = [o for o in offsets if o > hole]
    bounded = read_offsets(startingOffsets=f'{{"{topic}": {{"0": {hole}}}}}',
                           endingOffsets=f'{{"{topic}": {{"0": {after[0] + 1}}}}}')
    assert bounded == [after[0]], "a range starting in a hole reads from the next record and stops at its end"
    assert read_offsets(minPartitions="7") == offsets


@pytest.mark.parametrize(("options", "message"), [
    ({"startingOffsets": "latest"}, "'startingOffsets' cannot be 'latest' for batch queries"),
    ({"maxOffsetsPerTrigger": "5"}, "'maxOffsetsPerTrigger' only applies to streaming queries"),
    ({"kafka.group.id": "g"}, "'kafka.group.id' is not supported by the pybroker connector"),
    ({"startingOffset": "earliest"}, "unknown option 'startingoffset'"),
])
def test_bad_options_fail_with_a_clear_message(spark: SparkSession, broker: BrokerProcess, options: dict[str, str],
                                               message: str) -> None:
    with pytest.raises(Exception, match=message):
        read(spark, broker.bootstrap, subscribe="any", **options).collect()


def test_a_missing_topic_reads_as_empty(spark: SparkSession, broker: BrokerProcess,
                                        new_topic: Callable[..., str]) -> None:
    assert read(spark, broker.bootstrap, subscribe=new_topic()).count() == 0
    assert TopicPartition  # kafka-python's TopicPartition equals ours: both are (topic, partition) tuples
