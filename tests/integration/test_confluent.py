"""confluent-kafka (librdkafka) against a real broker: idempotent acks=all producer in every codec,
explicit-assign consumer that never commits, and the AdminClient.

librdkafka is the strictest of the stock clients about ApiVersions, header versions and idempotence
sequence numbers, so it catches wire mistakes the pure-Python clients forgive.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from pybroker.protocol.records.batch import iter_batches
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_consumer, ck_flush, ck_producer, ck_read

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {name: i for i, name in enumerate(CODECS)}
PARTITIONS = 3
RECORDS = 1500


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_acks_all_producer_every_codec(broker: BrokerProcess, new_topic: Callable[..., str],
                                                  codec: str) -> None:
    topic = new_topic()
    _create(broker.bootstrap, topic, PARTITIONS)
    producer = ck_producer(broker.bootstrap, **{"enable.idempotence": True, "acks": "all",
                                                "compression.type": codec, "linger.ms": 5})
    errors: list[KafkaError] = []
    delivered: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[msg.partition()].append((msg.offset(), int(msg.value().split(b"-")[1])))  # type: ignore[attr-defined]

    for i in range(RECORDS):
        key = None if i % 17 == 0 else f"k{i % 20}".encode()
        producer.produce(topic, key=key, value=f"value-{i}-".encode() * (1 + i % 4),
                         headers=[("i", str(i).encode()), ("codec", codec.encode())],
                         partition=i % PARTITIONS, on_delivery=on_delivery)
        producer.poll(0)
    ck_flush(producer)
    assert errors == []

    messages = ck_read(broker.bootstrap, topic, PARTITIONS, expected=RECORDS)
    for partition, got in messages.items():
        assert [m.offset() for m in got] == list(range(len(got))), "dense offsets from 0"
        values = [int(m.value().split(b"-")[1]) for m in got]
        assert values == list(range(partition, RECORDS, PARTITIONS)), f"partition {partition}: lost or reordered"
        assert sorted(delivered[partition]) == [(m.offset(), v) for m, v in zip(got, values, strict=True)]
        for m, v in zip(got, values, strict=True):
            assert m.headers() == [("i", str(v).encode()), ("codec", codec.encode())]
            assert m.key() == (None if v % 17 == 0 else f"k{v % 20}".encode())
    if not isinstance(broker, BrokerProcess) or broker.name != "pybroker":
        return
    stored = {h.compression for p in range(PARTITIONS)
              for segment in (broker.log_dirs[0] / f"{topic}-{p}").glob("*.log")
              for _, h in iter_batches(segment.read_bytes())}
    assert stored == {CODEC_IDS[codec]}, "librdkafka must really compress (lz4 needs FindCoordinator advertised)"


def test_assign_at_explicit_offsets(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    """A consumer assigned mid-log starts exactly there, per partition; nothing is ever committed."""
    topic = new_topic()
    _create(broker.bootstrap, topic, 2)
    producer = ck_producer(broker.bootstrap, acks="all", **{"linger.ms": 5})
    for i in range(400):
        producer.produce(topic, value=str(i).encode(), partition=i % 2)
    ck_flush(producer)
    starts = {0: 150, 1: 199}
    got: dict[int, list[int]] = {0: [], 1: []}
    with ck_consumer(broker.bootstrap) as consumer:
        consumer.assign([TopicPartition(topic, p, off) for p, off in starts.items()])
        at_end: set[int] = set()
        deadline = time.monotonic() + 20
        while len(at_end) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.3)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            got[message.partition()].append(message.offset())
        assert consumer.position([TopicPartition(topic, p) for p in (0, 1)])[0].offset == 200
    assert got == {0: list(range(150, 200)), 1: [199]}


def test_admin_create_list_delete(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    admin = ck_admin(broker.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics[topic].partitions) == 2
    assert metadata.topics[topic].error is None
    assert len(metadata.brokers) == 1

    again = admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic]
    with pytest.raises(KafkaException) as info:
        again.result(10)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("one_per_batch", [False, True], ids=["one-batch", "batch-of-one"])
def test_per_record_errors_on_a_compacted_topic(broker: BrokerProcess, new_topic: Callable[..., str],
                                               one_per_batch: bool) -> None:
    """librdkafka's own 0011 expectation: in one batch, the 10 keyless records fail INVALID_RECORD (named in
    the answer's record_errors) and the 90 others _INVALID_DIFFERENT_RECORD; one record a batch, the keyed
    ones succeed."""
    topic = new_topic()
    admin = ck_admin(broker.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  config={"cleanup.policy": "compact"})])[topic].result(10)
    # a long linger keeps the 100 records in one batch even on a loaded machine (flush sends at once)
    config: dict[str, object] = {"linger.ms": 5_000, "enable.idempotence": False}
    if one_per_batch:
        config["batch.size"] = 1
    producer = ck_producer(broker.bootstrap, **config)
    outcome: dict[int, KafkaError | None] = {}

    def report(i: int) -> Callable[[KafkaError | None, object], None]:
        return lambda err, _msg: outcome.__setitem__(i, err)

    for i in range(100):
        producer.produce(topic, value=b"message %d" % i, key=None if i % 10 == 0 else b"key %d" % i,
                         partition=0, on_delivery=report(i))
    ck_flush(producer)
    codes = {i: (err.code() if err is not None else None) for i, err in outcome.items()}
    assert sorted(i for i, code in codes.items() if code == KafkaError.INVALID_RECORD) == list(range(0, 100, 10))
    others = {code for i, code in codes.items() if i % 10}
    assert others == ({None} if one_per_batch else {KafkaError._INVALID_DIFFERENT_RECORD})
