"""librdkafka (confluent-kafka), aiokafka and kcat against a real broker process."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import BrokerProcess

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def _consume(broker: BrokerProcess, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None or message.error().code() == KafkaError._PARTITION_EOF, message.error()
        if message.error() is None:
            got.append(message)
    consumer.close()
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_idempotent_producer_every_codec(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=1)])[topic_name].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                         "compression.type": codec, "linger.ms": 5})
    errors: list[KafkaError] = []
    for i in range(1500):
        producer.produce(topic_name, key=b"k%d" % (i % 20), value=b"value-%d" % i,
                         headers=[("i", str(i).encode())],
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0
    assert errors == []
    messages = _consume(broker, topic_name, 3, 1500)
    assert sorted(int(m.value().split(b"-")[1]) for m in messages) == list(range(1500))
    per_key: dict[bytes, list[int]] = {}
    for m in messages:
        per_key.setdefault(m.key(), []).append(int(m.value().split(b"-")[1]))
    assert all(v == sorted(v) for v in per_key.values())


def test_confluent_admin_create_list_delete(broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])[topic_name].result(10)
    assert len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 2
    again = admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])[topic_name]
    with pytest.raises(Exception, match="already exists"):
        again.result(10)
    admin.delete_topics([topic_name])[topic_name].result(10)
    assert topic_name not in admin.list_topics(timeout=10).topics


async def test_aiokafka_round_trip(broker: BrokerProcess, topic_name: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip",
                                enable_idempotence=True)
    await producer.start()
    try:
        for i in range(200):
            await producer.send(topic_name, b"%d" % i, key=b"k", partition=0)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = AioTopicPartition(topic_name, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < 200 and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                got += [int(m.value) for m in batch]
        assert got == list(range(200))
    finally:
        await consumer.stop()


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make test installs it)")
def test_kcat_list_produce_consume(broker: BrokerProcess, topic_name: str) -> None:
    assert KCAT is not None
    lines = [f"line {i}" for i in range(20)]
    subprocess.run([KCAT, "-P", "-b", broker.bootstrap, "-t", topic_name, "-z", "snappy"],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=30)
    listing = subprocess.run([KCAT, "-L", "-b", broker.bootstrap], capture_output=True, text=True, check=True,
                             timeout=30).stdout
    assert f'topic "{topic_name}" with 1 partitions' in listing
    consumed = subprocess.run([KCAT, "-C", "-b", broker.bootstrap, "-t", topic_name, "-e", "-o", "beginning"],
                              capture_output=True, text=True, check=True, timeout=30).stdout
    assert consumed.splitlines() == lines
