"""Sustained acks=all load with large batches: every record acknowledged, read back, clean stop.

Why: races between the request path and the background flusher (group commit of fsyncs, index
writes) only show up when big batches arrive faster than one fsync; the small tests never get there.
Sized to take a few seconds (about 40 MB), bounded in time by the client's own timeouts.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_flush, ck_producer, ck_read, close_clients

PARTITIONS = 2
RECORDS = 40_000
SIZE = 1024


@pytest.mark.slow
def test_acks_all_load_of_1kib_records(broker_factory: Callable[..., BrokerProcess],
                                       new_topic: Callable[..., str]) -> None:
    broker = broker_factory(needs_restart=True)  # its own broker: a clean stop is part of the check
    topic = new_topic()
    admin = ck_admin(broker.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(10)
    producer = ck_producer(broker.bootstrap, **{
        "acks": "all", "linger.ms": 5, "batch.size": 1_000_000, "batch.num.messages": 10_000,
        "queue.buffering.max.messages": 50_000, "message.timeout.ms": 15_000})
    errors: list[KafkaError] = []
    payload = bytes(range(256)) * (SIZE // 256)
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, payload[:-8] + i.to_bytes(8, "big"), partition=i % PARTITIONS,
                                 on_delivery=lambda err, _m: errors.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
    ck_flush(producer, timeout=25)
    assert errors == [], f"{len(errors)} deliveries failed, first: {errors[0]}"
    stored = ck_read(broker.bootstrap, topic, PARTITIONS, expected=RECORDS, timeout=40)
    for partition, messages in stored.items():
        seqs = [int.from_bytes(m.value()[-8:], "big") for m in messages]
        assert seqs == list(range(partition, RECORDS, PARTITIONS)), f"partition {partition} differs"
    close_clients()
    broker.stop()  # exit status 0, within the stop timeout
