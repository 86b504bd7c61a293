"""Acknowledged means durable: `kill -9` under acks=all load loses nothing acknowledged, and a clean
SIGTERM stop exits 0 and keeps everything."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import BrokerProcess

PARTITIONS = 3


def _read_everything(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> dict[int, list[int]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: dict[int, list[int]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
            at_end.add(message.partition())
            continue
        values[message.partition()].append(int(message.value()))
    consumer.close()
    assert len(at_end) == partitions, "did not reach the end of every partition"
    return values


@pytest.mark.slow
def test_kill9_under_load_loses_no_acknowledged_record(broker_factory: Callable[..., BrokerProcess],
                                                       topic_name: str) -> None:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=1)])[topic_name].result(10)
    acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked[msg.partition()].append(int(msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "message.timeout.ms": 5000})
    killed = False
    deadline = time.monotonic() + 60
    i = 0
    while not killed and i < 200_000 and time.monotonic() < deadline:
        try:
            producer.produce(topic_name, value=str(i).encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
            i += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        if sum(map(len, acked.values())) >= 5000:
            broker.kill9()
            killed = True
    assert killed, "the load finished before the broker was killed"
    producer.purge()
    producer.flush(5)
    acknowledged = {p: list(v) for p, v in acked.items()}
    broker.start()
    stored = _read_everything(broker, topic_name)
    for partition, values in acknowledged.items():
        assert len(stored[partition]) == len(set(stored[partition])), "duplicates after restart"
        kept = [v for v in stored[partition] if v in set(values)]
        assert kept == values, f"partition {partition}: acknowledged records lost or out of order"
        assert stored[partition] == sorted(stored[partition])


def test_sigterm_exits_zero_and_restart_keeps_everything(broker_factory: Callable[..., BrokerProcess],
                                                         topic_name: str) -> None:
    broker = broker_factory()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1"})
    for i in range(3000):
        producer.produce(topic_name, value=str(i).encode(), partition=0)
        producer.poll(0)
    assert producer.flush(20) == 0
    assert broker.stop() == 0, broker.tail()
    broker.start()
    assert _read_everything(broker, topic_name, 1)[0] == list(range(3000))
    assert '"clean_shutdown": true' in broker.tail(200)
