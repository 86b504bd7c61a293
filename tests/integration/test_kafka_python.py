"""kafka-python 3 against a real broker process: codecs, keys, headers, order, offsets, admin."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

from tests.integration.conftest import BrokerProcess

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def _producer(broker: BrokerProcess, **kw: object) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000, **kw)


def _read_all(broker: BrokerProcess, topic: str, partitions: int, expected: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=3000,
                             enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    records = []
    deadline = time.monotonic() + 20
    while len(records) < expected and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records += batch
    consumer.close()
    return records


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_produce_consume_every_codec(broker: BrokerProcess, topic_name: str, codec: str | None) -> None:
    producer = _producer(broker, compression_type=codec, linger_ms=5)
    sent = []
    for i in range(300):
        key = None if i % 7 == 0 and i % 11 else b"key-%d" % i
        value = None if i % 11 == 0 else (b"value-%d-" % i) * 5
        headers = [("n", str(i).encode()), ("empty", b"")] if i % 3 == 0 else []
        producer.send(topic_name, key=key, value=value, headers=headers, partition=0)
        sent.append((key, value, headers))
    producer.flush(20)
    producer.close()
    records = _read_all(broker, topic_name, 1, len(sent))
    assert [(r.key, r.value, list(r.headers)) for r in records] == sent
    assert [r.offset for r in records] == list(range(len(sent)))


def test_keys_stay_in_one_partition_in_order(broker: BrokerProcess, topic_name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 3, 1)])
    producer = _producer(broker)
    for i in range(600):
        producer.send(topic_name, key=b"k%d" % (i % 12), value=b"%d" % i)
    producer.flush(20)
    producer.close()
    records = _read_all(broker, topic_name, 3, 600)
    assert len(records) == 600
    partitions_of: dict[bytes, set[int]] = {}
    values_of: dict[bytes, list[int]] = {}
    for r in records:
        partitions_of.setdefault(r.key, set()).add(r.partition)
        values_of.setdefault(r.key, []).append(int(r.value))
    assert all(len(p) == 1 for p in partitions_of.values())
    assert all(v == sorted(v) for v in values_of.values())
    assert len({p for ps in partitions_of.values() for p in ps}) > 1
    admin.close()


def test_list_offsets_by_time(broker: BrokerProcess, topic_name: str) -> None:
    producer = _producer(broker)
    base = 1_700_000_000_000
    for i in range(10):
        producer.send(topic_name, value=b"x", timestamp_ms=base + i * 1000, partition=0)
        producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(topic_name, 0)
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 10
    found = consumer.offsets_for_times({tp: base + 3500})[tp]
    assert (found.offset, found.timestamp) == (4, base + 4000)
    assert consumer.offsets_for_times({tp: base + 99_000})[tp] is None
    consumer.close()


def test_admin_create_describe_alter_partitions_delete(broker: BrokerProcess, topic_name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 2, 1, topic_configs={"retention.ms": "12345",
                                                                    "cleanup.policy": "delete"})])
    assert topic_name in admin.list_topics()
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
    assert modified["topic"][topic_name]["retention.ms"]["value"] == "12345"
    everything = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)], config_filter="all")
    assert everything["topic"][topic_name]["segment.bytes"]["value"] == "1073741824"
    brokers = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
    assert brokers["broker"]["1"]["num.partitions"]["value"] == "1"
    admin.create_partitions({topic_name: NewPartitions(total_count=4)})
    described = admin.describe_topics([topic_name])
    assert len(described[0]["partitions"]) == 4
    admin.delete_topics([topic_name])
    deadline = time.monotonic() + 10
    while topic_name in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic_name not in admin.list_topics()
    admin.close()


def test_producing_creates_the_topic(broker: BrokerProcess, topic_name: str) -> None:
    producer = _producer(broker)
    producer.send(topic_name, b"hello").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert consumer.partitions_for_topic(topic_name) == {0}
    consumer.close()


def test_idempotent_by_default_and_no_duplicates(broker: BrokerProcess, topic_name: str) -> None:
    producer = _producer(broker, enable_idempotence=True, acks="all", max_in_flight_requests_per_connection=5,
                         linger_ms=1)
    futures = [producer.send(topic_name, value=b"%d" % i, partition=0) for i in range(2000)]
    producer.flush(30)
    offsets = [f.get(timeout=10).offset for f in futures]
    producer.close()
    assert offsets == list(range(2000))
    records = _read_all(broker, topic_name, 1, 2000)
    assert [int(r.value) for r in records] == list(range(2000))
