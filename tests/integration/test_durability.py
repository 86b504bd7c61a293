"""Acknowledged means durable: `kill -9` in the middle of an acks=all stream loses no acknowledged
record and duplicates none, and a clean SIGTERM stop exits 0 and keeps everything.

The producer keeps going across the crash and the restart, as a real application would: librdkafka
retries the batches that were in flight, so this also checks that the broker rebuilds its idempotent
producer state on recovery (otherwise a retried batch that had reached the disk is written twice).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic
from kafka import TopicPartition

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_flush, ck_producer, ck_read, close_clients, kp_consumer

PARTITIONS = 3
RECORDS = 20_000
KILL_AFTER_ACKED = 6_000
LOAD_DEADLINE_S = 60.0


def _create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    admin = ck_admin(broker.bootstrap)  # held in a name: a collected AdminClient cancels its futures
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)


@pytest.mark.slow
def test_kill9_mid_stream_keeps_every_acknowledged_record_once_in_order(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory(needs_restart=True)
    topic = new_topic()
    _create(broker, topic, PARTITIONS)
    producer = ck_producer(broker.bootstrap, **{
        "acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.num.messages": 500,
        "message.timeout.ms": 45_000, "retry.backoff.ms": 100, "reconnect.backoff.ms": 50,
        "queue.buffering.max.messages": 2_000})
    acked: dict[int, dict[int, int]] = {p: {} for p in range(PARTITIONS)}  # partition -> {seq: offset}
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
            return
        seq = int(msg.value().split(b":")[1])  # type: ignore[attr-defined]
        acked[msg.partition()][seq] = msg.offset()  # type: ignore[attr-defined]

    acked_at_kill = -1
    deadline = time.monotonic() + LOAD_DEADLINE_S
    i = 0
    while i < RECORDS and time.monotonic() < deadline:
        partition, seq = i % PARTITIONS, i // PARTITIONS
        try:
            producer.produce(topic, value=f"{partition}:{seq}:".encode() + b"p" * 80, partition=partition,
                             on_delivery=on_delivery)
            i += 1
        except BufferError:  # the bounded queue is full: let deliveries drain, as a real app would
            producer.poll(0.05)
        producer.poll(0)
        if acked_at_kill < 0 and sum(map(len, acked.values())) >= KILL_AFTER_ACKED:
            acked_at_kill = sum(map(len, acked.values()))
            broker.kill9()
            broker.start()  # same dirs, same port: the producer reconnects and retries what was in flight
    assert i == RECORDS, f"only {i} of {RECORDS} records were handed to the producer in {LOAD_DEADLINE_S}s"
    ck_flush(producer, timeout=45)
    assert 0 <= acked_at_kill < RECORDS, "the broker was never killed mid-stream"
    assert errors == [], f"{len(errors)} deliveries failed, first: {errors[0]}"

    stored = ck_read(broker.bootstrap, topic, PARTITIONS, timeout=45)
    for partition in range(PARTITIONS):
        seqs = [int(m.value().split(b":")[1]) for m in stored[partition]]
        offsets = [m.offset() for m in stored[partition]]
        assert len(seqs) == len(set(seqs)), f"partition {partition}: duplicates after the crash"
        assert seqs == sorted(seqs), f"partition {partition}: order broken after the crash"
        assert offsets == list(range(len(offsets))), f"partition {partition}: offsets not dense"
        at = dict(zip(seqs, offsets, strict=True))
        lost = [s for s in acked[partition] if s not in at]
        assert not lost, f"partition {partition}: {len(lost)} acknowledged records lost, e.g. {lost[:5]}"
        moved = [s for s, off in acked[partition].items() if at[s] != off]
        assert not moved, f"partition {partition}: records not at their acknowledged offsets, e.g. {moved[:5]}"
        assert len(acked[partition]) == RECORDS // PARTITIONS + (partition < RECORDS % PARTITIONS)


def _clean_shutdown_flags(broker: BrokerProcess) -> list[bool]:
    """The `clean_shutdown` field of every "log dir loaded" line the broker logged, in order."""
    flags = []
    for line in broker.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == "log dir loaded":
                flags.append(bool(event.get("clean_shutdown")))
    return flags


def test_sigterm_exits_zero_and_restart_keeps_everything(broker_factory: Callable[..., BrokerProcess],
                                                         new_topic: Callable[..., str]) -> None:
    broker = broker_factory(needs_restart=True)
    topic = new_topic()
    _create(broker, topic, 2)
    producer = ck_producer(broker.bootstrap, acks="1", **{"linger.ms": 5})  # acks=1: not yet fsynced
    for i in range(3000):
        producer.produce(topic, value=str(i).encode(), partition=i % 2)
        producer.poll(0)
    ck_flush(producer)
    broker.stop()  # asserts exit status 0
    broker.start()
    assert _clean_shutdown_flags(broker)[-1] is True, "the restart did not find the clean-shutdown marker"

    stored = ck_read(broker.bootstrap, topic, 2)
    for partition in range(2):
        assert [int(m.value()) for m in stored[partition]] == list(range(partition, 3000, 2))
    producer = ck_producer(broker.bootstrap, acks="all")
    offsets: list[int] = []
    producer.produce(topic, value=b"after restart", partition=1,
                     on_delivery=lambda err, msg: offsets.append(msg.offset()))
    ck_flush(producer)
    assert offsets == [1500], "appends after a restart continue at the old log end"

    with kp_consumer(broker.bootstrap) as consumer:
        tps = [TopicPartition(topic, p) for p in range(2)]
        assert consumer.end_offsets(tps) == {tps[0]: 1500, tps[1]: 1501}
    close_clients()
    broker.stop()
