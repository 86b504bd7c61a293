"""kafka-python 3.0.12 against a real broker: every codec, keys, headers, nulls, order, offsets, admin.

No consumer groups here (a later issue): every read is `assign` + `seek`, with no group id.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kafka import TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_admin, kp_consumer, kp_producer, kp_read, kp_wait_for_topic

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
Headers = list[tuple[str, bytes]]


def _create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    with kp_admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    kp_wait_for_topic(bootstrap, topic)


def _record(i: int) -> tuple[bytes | None, bytes | None, Headers]:
    """A mix that exercises every varint-length corner: null key, null value, empty value, headers."""
    key = None if i % 5 == 0 else f"key-{i}".encode()
    # kafka-python refuses a record with neither key nor value, so a null value always has a key
    value = None if i % 11 == 0 and key is not None else (b"" if i % 13 == 0 else (f"value-{i}-".encode() * (1 + i % 9)))
    headers: Headers = []
    if i % 3 == 0:
        headers = [("n", str(i).encode()), ("empty", b""), ("n", b"dup-key-allowed"), ("ünï", b"\x00\xff")]
    return key, value, headers


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_every_codec_round_trips_keys_values_headers_in_order(broker: BrokerProcess,
                                                             new_topic: Callable[..., str],
                                                             codec: str | None) -> None:
    topic = new_topic()
    _create(broker.bootstrap, topic, 3)
    sent: dict[int, list[tuple[bytes | None, bytes | None, Headers]]] = {0: [], 1: [], 2: []}
    with kp_producer(broker.bootstrap, compression_type=codec, linger_ms=5) as producer:
        futures = []
        for i in range(300):
            key, value, headers = _record(i)
            futures.append(producer.send(topic, key=key, value=value, headers=headers, partition=i % 3))
            sent[i % 3].append((key, value, headers))
        producer.flush(timeout=20)
        for future in futures:
            assert future.get(timeout=10).offset >= 0
    records = kp_read(broker.bootstrap, topic, 3, 300)
    got: dict[int, list[tuple[bytes | None, bytes | None, Headers]]] = {0: [], 1: [], 2: []}
    for r in records:
        got[r.partition].append((r.key, r.value, list(r.headers)))
        assert r.offset == len(got[r.partition]) - 1, "offsets in a partition are dense from 0"
    assert got == sent


def test_keyed_records_stay_in_one_partition_in_order(broker: BrokerProcess,
                                                      new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(broker.bootstrap, topic, 3)
    with kp_producer(broker.bootstrap, linger_ms=2) as producer:
        for i in range(600):
            producer.send(topic, key=f"k{i % 12}".encode(), value=str(i).encode())
        producer.flush(timeout=20)
    records = kp_read(broker.bootstrap, topic, 3, 600)
    assert len(records) == 600
    partitions_of: dict[bytes, set[int]] = {}
    values_of: dict[bytes, list[int]] = {}
    for r in records:
        partitions_of.setdefault(r.key, set()).add(r.partition)
        values_of.setdefault(r.key, []).append(int(r.value))
    assert all(len(p) == 1 for p in partitions_of.values()), partitions_of
    assert all(v == sorted(v) and len(v) == 50 for v in values_of.values())
    assert len({p for ps in partitions_of.values() for p in ps}) == 3, "12 keys should reach all 3 partitions"


def test_list_offsets_by_time_beginning_and_end(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 60_000
    with kp_producer(broker.bootstrap, linger_ms=50) as producer:
        for i in range(5):  # one batch per record
            producer.send(topic, value=b"single", timestamp_ms=base + i * 1000, partition=0)
            producer.flush(timeout=10)
        for i in range(5, 10):  # one batch holding five timestamps: the answer lies inside a batch
            producer.send(topic, value=b"batched", timestamp_ms=base + i * 1000, partition=0)
        producer.flush(timeout=10)
    tp = TopicPartition(topic, 0)
    with kp_consumer(broker.bootstrap) as consumer:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 10}
        wanted = {base - 5000: (0, base), base: (0, base), base + 2500: (3, base + 3000),
                  base + 7000: (7, base + 7000), base + 7001: (8, base + 8000), base + 9000: (9, base + 9000)}
        for target, (offset, ts) in wanted.items():
            found = consumer.offsets_for_times({tp: target})[tp]
            assert found is not None, f"no offset for {target - base}"
            assert (found.offset, found.timestamp) == (offset, ts), f"target {target - base}"
        assert consumer.offsets_for_times({tp: base + 10_000})[tp] is None


def _node_id(admin: object, topic: str) -> int:
    described = admin.describe_topics([topic])  # type: ignore[attr-defined]
    return int(described[0]["partitions"][0]["leader_id"])


def test_admin_create_describe_configs_partitions_delete(broker: BrokerProcess,
                                                         new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "12345"})])
        kp_wait_for_topic(broker.bootstrap, topic)
        assert topic in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 2, 1)])

        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        modified = admin.describe_configs([resource])["topic"][topic]
        assert modified["retention.ms"]["value"] == "12345"
        everything = admin.describe_configs([resource], config_filter="all")["topic"][topic]
        assert everything["retention.ms"]["value"] == "12345"
        assert "segment.bytes" in everything and "cleanup.policy" in everything

        node = str(_node_id(admin, topic))
        broker_configs = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)],
                                                config_filter="all")["broker"][node]
        assert "num.partitions" in broker_configs
        assert "log.segment.bytes" in broker_configs

        admin.create_partitions({topic: NewPartitions(total_count=4)})
        deadline = time.monotonic() + 10
        while len(admin.describe_topics([topic])[0]["partitions"]) != 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(admin.describe_topics([topic])[0]["partitions"]) == 4
        with kp_producer(broker.bootstrap) as producer:
            assert producer.send(topic, b"to the new partition", partition=3).get(timeout=10).offset == 0

        admin.delete_topics([topic])
        deadline = time.monotonic() + 10
        while topic in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert topic not in admin.list_topics()


def test_producing_to_a_new_topic_creates_it(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with kp_producer(broker.bootstrap) as producer:
        sent = producer.send(topic, b"hello").get(timeout=10)
    assert sent.offset == 0
    partitions = kp_wait_for_topic(broker.bootstrap, topic)
    assert sent.partition in partitions
    records = kp_read(broker.bootstrap, topic, len(partitions), 1)
    assert [(r.partition, r.value) for r in records] == [(sent.partition, b"hello")]


def test_auto_created_topic_gets_num_partitions(broker_factory: Callable[..., BrokerProcess],
                                                new_topic: Callable[..., str]) -> None:
    fresh = broker_factory({"num.partitions": "3", "auto.create.topics.enable": "true"})
    topic = new_topic()
    with kp_producer(fresh.bootstrap) as producer:
        producer.send(topic, b"first").get(timeout=10)
    assert kp_wait_for_topic(fresh.bootstrap, topic) == {0, 1, 2}


def test_idempotent_by_default_no_duplicates(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with kp_producer(broker.bootstrap, linger_ms=1) as producer:
        assert producer.config["enable_idempotence"] is True, "kafka-python 3 should default to idempotence"
        futures = [producer.send(topic, value=str(i).encode(), partition=0) for i in range(2000)]
        producer.flush(timeout=30)
        offsets = [f.get(timeout=10).offset for f in futures]
    assert offsets == list(range(2000))
    records = kp_read(broker.bootstrap, topic, 1, 2000)
    assert [int(r.value) for r in records] == list(range(2000))
