"""`df.write` / `writeStream` with format("pybroker"): records land as the DataFrame says, or the task fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_producer, kp_read
from tests.integration.spark.support import create_topic, read_stream, run_to_end

HEADERS = "array<struct<key:string,value:binary>>"


def _write(df, bootstrap: str, mode: str = "append", **options: str) -> None:  # type: ignore[no-untyped-def]
    writer = df.write.format("pybroker").option("kafka.bootstrap.servers", bootstrap).mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_rows_land_with_keys_headers_and_partitions_as_given(spark: SparkSession, broker: BrokerProcess,
                                                             new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 3)
    rows = [(None if i % 5 == 0 else f"k{i}", f"v{i}".encode(), topic, i % 3,
             [("n", str(i).encode()), ("empty", b"")] if i % 2 else None) for i in range(30)]
    df = spark.createDataFrame(rows, f"key string, value binary, topic string, partition int, headers {HEADERS}")
    _write(df.repartition(2), broker.bootstrap)

    got = kp_read(broker.bootstrap, topic, 3, 30)
    assert len(got) == 30
    by_value = {r.value: r for r in got}
    for key, value, _, partition, headers in rows:
        record = by_value[value]
        assert record.key == (None if key is None else key.encode())
        assert record.partition == partition
        assert list(record.headers) == (headers or [])


def test_the_topic_option_overrides_the_column_and_null_partitions_use_the_partitioner(
        spark: SparkSession, broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 2)
    df = spark.createDataFrame([(f"k{i % 4}", f"v{i}", "not-this-topic", None) for i in range(40)],
                               "key string, value string, topic string, partition int")
    _write(df, broker.bootstrap, topic=topic)
    got = kp_read(broker.bootstrap, topic, 2, 40)
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(40))
    partition_of: dict[bytes, set[int]] = {}
    for r in got:
        partition_of.setdefault(r.key, set()).add(r.partition)
    assert all(len(p) == 1 for p in partition_of.values()), "one key, one partition (the key's hash)"


@pytest.mark.parametrize(("schema", "mode", "options", "message"), [
    ("value string", "overwrite", {"topic": "t"}, "the pybroker sink only appends"),
    ("key string", "append", {"topic": "t"}, "needs a 'value' column"),
    ("value string", "append", {}, "set the 'topic' option or give the DataFrame a 'topic' column"),
    ("value int", "append", {"topic": "t"}, "column 'value' must be of type string or binary, not int"),
    ("value string, partition string", "append", {"topic": "t"}, "column 'partition' must be of type int"),
    ("value string", "append", {"topic": "t", "kafka.acks": "2"}, "must be all, -1, 0 or 1"),
])
def test_a_dataframe_the_sink_cannot_write_is_refused(spark: SparkSession, broker: BrokerProcess, schema: str,
                                                      mode: str, options: dict[str, str], message: str) -> None:
    row = tuple("1" if "string" in part else 1 for part in schema.split(","))
    with pytest.raises(Exception, match=message):
        _write(spark.createDataFrame([row], schema), broker.bootstrap, mode=mode, **options)


def test_a_record_the_client_cannot_send_fails_the_task(spark: SparkSession, broker: BrokerProcess,
                                                        new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    df = spark.createDataFrame([("v", 4)], "value string, partition int")
    with pytest.raises(Exception, match=f"could not send a record to {topic}-4"):
        _write(df, broker.bootstrap, topic=topic)


def test_a_record_the_broker_refuses_fails_the_task(spark: SparkSession, broker: BrokerProcess,
                                                    new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1, **{"max.message.bytes": "1000"})
    df = spark.createDataFrame([("x" * 5000,)], "value string")
    with pytest.raises(Exception, match=r"1 record\(s\) were not acknowledged by the broker.*MessageSizeTooLarge"):
        _write(df, broker.bootstrap, topic=topic)


def test_a_stream_copies_one_topic_into_another(spark: SparkSession, broker: BrokerProcess,
                                                new_topic: Callable[..., str], tmp_path: Path) -> None:
    source, sink = new_topic("in"), new_topic("out")
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, sink, 2)
    with kp_producer(broker.bootstrap) as producer:
        for i in range(50):
            producer.send(source, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                          headers=[("i", str(i).encode())])
        producer.flush(timeout=20)
    stream = read_stream(spark, broker.bootstrap, subscribe=source, startingOffsets="earliest",
                         includeHeaders="true", maxOffsetsPerTrigger="20")
    run_to_end(lambda: stream.select("key", "value", "partition", "headers").writeStream.format("pybroker")
               .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", sink)
               .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start(), 240)
    copied = kp_read(broker.bootstrap, sink, 2, 50)
    assert sorted((r.partition, r.key, r.value, list(r.headers)) for r in copied) == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())]) for i in range(50))
