"""read_committed against a real broker process: a librdkafka transactional producer commits and aborts,
read_committed consumers see only committed records and read_uncommitted ones see all; a broker killed
with a transaction open keeps its last stable offset there after restart until the transaction ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka import TopicPartition as KpTopicPartition

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_consumer, ck_producer, kp_consumer

pytestmark = pytest.mark.slow


def _create(bootstrap: str, topic: str) -> None:
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(10)


def _read(bootstrap: str, topic: str, isolation: str, timeout: float = 20.0) -> list[bytes]:
    """Every value up to the partition end the consumer is allowed to see."""
    values: list[bytes] = []
    with ck_consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True}) as consumer:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.3)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return values
            values.append(message.value())
    raise AssertionError(f"no end of partition within {timeout}s; read {len(values)}")


def _kp_read(bootstrap: str, topic: str, isolation: str, expected: int, timeout: float = 20.0) -> list[bytes]:
    values: list[bytes] = []
    with kp_consumer(bootstrap, isolation_level=isolation) as consumer:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                values.extend(r.value for r in records)
        time.sleep(0.5)  # anything beyond what is expected would show up here
        for records in consumer.poll(timeout_ms=300).values():
            values.extend(r.value for r in records)
    return values


async def _aio_read(bootstrap: str, topic: str, isolation: str, expected: int, timeout: float = 20.0) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200,
                                isolation_level=isolation, request_timeout_ms=10_000)
    await asyncio.wait_for(consumer.start(), 15)
    values: list[bytes] = []
    try:
        tp = AioTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=300)).values():
                values.extend(r.value for r in records)
        for records in (await consumer.getmany(timeout_ms=500)).values():
            values.extend(r.value for r in records)
    finally:
        await consumer.stop()
    return values


def _stable_end(bootstrap: str, topic: str) -> tuple[int, int]:
    """(LSO, high watermark) as consumers see them through ListOffsets."""
    lso = hw = -1
    for isolation in ("read_committed", "read_uncommitted"):
        with ck_consumer(bootstrap, **{"isolation.level": isolation}) as consumer:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if isolation == "read_committed":
            lso = high
        else:
            hw = high
    return lso, hw


def _producer(bootstrap: str, txn_id: str, **config: object) -> object:
    producer = ck_producer(bootstrap, **{"transactional.id": txn_id, "acks": "all", **config})
    producer.init_transactions(20)
    return producer


def test_committed_and_aborted_transactions(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(broker.bootstrap, topic)
    producer = _producer(broker.bootstrap, f"{topic}-txn")
    for batch, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=f"{batch}{i}".encode(), partition=0)
        producer.flush(10)
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)
    committed = _read(broker.bootstrap, topic, "read_committed")
    assert committed == [f"{b}{i}".encode() for b in "ac" for i in range(5)]
    everything = _read(broker.bootstrap, topic, "read_uncommitted")
    assert everything == [f"{b}{i}".encode() for b in "abc" for i in range(5)]
    lso, hw = _stable_end(broker.bootstrap, topic)
    assert lso == hw == 18  # 15 records and 3 markers
    # kafka-python and aiokafka skip aborted data by the fetch's aborted-transaction list too
    assert _kp_read(broker.bootstrap, topic, "read_committed", 10) == committed
    assert _kp_read(broker.bootstrap, topic, "read_uncommitted", 15) == everything
    assert asyncio.run(_aio_read(broker.bootstrap, topic, "read_committed", 10)) == committed
    assert asyncio.run(_aio_read(broker.bootstrap, topic, "read_uncommitted", 15)) == everything


def test_open_transaction_holds_the_lso_across_kill9(broker_factory: Callable[..., BrokerProcess],
                                                      new_topic: Callable[..., str]) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"},
                            needs_restart=True)
    topic = new_topic()
    _create(broker.bootstrap, topic)
    plain = ck_producer(broker.bootstrap, acks="all")
    plain.produce(topic, value=b"before", partition=0)
    assert plain.flush(10) == 0
    producer = _producer(broker.bootstrap, f"{topic}-txn", **{"transaction.timeout.ms": 8000,
                                                                   "socket.timeout.ms": 5000, "message.timeout.ms": 8000})
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"open%d" % i, partition=0)
    assert producer.flush(10) == 0
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(10) == 0
    assert _stable_end(broker.bootstrap, topic) == (1, 5)
    broker.kill9()
    broker.restart()
    assert _stable_end(broker.bootstrap, topic) == (1, 5)  # the open transaction survived the crash
    assert _read(broker.bootstrap, topic, "read_committed") == [b"before"]
    deadline = time.monotonic() + 60
    while _stable_end(broker.bootstrap, topic)[0] == 1 and time.monotonic() < deadline:
        time.sleep(1)  # the coordinator aborts it past its timeout
    lso, hw = _stable_end(broker.bootstrap, topic)
    assert lso == hw == 6
    assert _read(broker.bootstrap, topic, "read_committed") == [b"before", b"after"]
