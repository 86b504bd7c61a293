"""Stock clients configured to fail fast, and read-back helpers shared by the integration tests.

Why: every client library defaults to timeouts of 30-120 s and retries forever; against a broken broker
that turns one failing test into a hung suite. Everything here gives up within seconds, and every
read-back loop is bounded in time as well as in count. Clients are context managers so no socket is
left for the garbage collector (a ResourceWarning is an error in this suite).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

READ_TIMEOUT_S = 30.0

KP_COMMON: dict[str, Any] = {"request_timeout_ms": 10_000, "bootstrap_timeout_ms": 10_000,
                             "reconnect_backoff_max_ms": 1000}
KP_PRODUCER: dict[str, Any] = {**KP_COMMON, "max_block_ms": 10_000, "delivery_timeout_ms": 20_000}
KP_CONSUMER: dict[str, Any] = {**KP_COMMON, "enable_auto_commit": False, "fetch_max_wait_ms": 200}

CK_COMMON: dict[str, Any] = {"socket.timeout.ms": 10_000, "reconnect.backoff.max.ms": 1000,
                             "topic.metadata.refresh.interval.ms": 5000}
CK_PRODUCER: dict[str, Any] = {**CK_COMMON, "message.timeout.ms": 20_000}
# group.id only because librdkafka's Consumer will not start without one; nothing is ever committed.
CK_CONSUMER: dict[str, Any] = {**CK_COMMON, "group.id": "pybroker-tests-never-commits",
                               "enable.auto.commit": False, "enable.auto.offset.store": False,
                               "enable.partition.eof": True, "auto.offset.reset": "earliest",
                               "fetch.wait.max.ms": 200}


# -- kafka-python --------------------------------------------------------------------------------------
@contextlib.contextmanager
def kp_producer(bootstrap: str, **config: Any) -> Iterator[KafkaProducer]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **{**KP_PRODUCER, **config})
    try:
        yield producer
    finally:
        producer.close(timeout=10)


@contextlib.contextmanager
def kp_consumer(bootstrap: str, **config: Any) -> Iterator[KafkaConsumer]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **{**KP_CONSUMER, **config})
    try:
        yield consumer
    finally:
        consumer.close()


@contextlib.contextmanager
def kp_admin(bootstrap: str, **config: Any) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **{**KP_COMMON, **config})
    try:
        yield admin
    finally:
        admin.close()


def kp_read(bootstrap: str, topic: str, partitions: int, expected: int,
            timeout: float = READ_TIMEOUT_S) -> list[ConsumerRecord]:
    """Everything from offset 0 of each partition (assign + seek, no group), stopping at `expected`."""
    records: list[ConsumerRecord] = []
    with kp_consumer(bootstrap) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=300).values():
                records += batch
    return records


def kp_wait_for_topic(bootstrap: str, topic: str, timeout: float = 10.0) -> set[int]:
    """The topic's partitions once the broker reports it (a created topic can take a moment to show)."""
    with kp_consumer(bootstrap) as consumer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            parts = consumer.partitions_for_topic(topic)
            if parts:
                return set(parts)
            time.sleep(0.1)
    raise AssertionError(f"topic {topic!r} did not appear within {timeout}s")


# -- confluent-kafka (librdkafka) ----------------------------------------------------------------------
_PRODUCERS: list[Producer] = []


def ck_producer(bootstrap: str, **config: Any) -> Producer:
    """A librdkafka producer, closed by `close_clients()` at the end of the test (the conftest does it).

    Without that, a producer kept alive by a failed test's traceback reconnects to the stopped broker
    and fills the rest of the run's output with connection errors.
    """
    producer = Producer({"bootstrap.servers": bootstrap, **CK_PRODUCER, **config})
    _PRODUCERS.append(producer)
    return producer


def close_clients() -> None:
    """Drop whatever the test's producers still hold and close them."""
    while _PRODUCERS:
        producer = _PRODUCERS.pop()
        with contextlib.suppress(Exception):
            producer.purge()
            producer.flush(0)
            producer.close()


@contextlib.contextmanager
def ck_consumer(bootstrap: str, **config: Any) -> Iterator[Consumer]:
    consumer = Consumer({"bootstrap.servers": bootstrap, **CK_CONSUMER, **config})
    try:
        yield consumer
    finally:
        consumer.close()


def ck_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **CK_COMMON})


def ck_read(bootstrap: str, topic: str, partitions: int, timeout: float = READ_TIMEOUT_S,
            expected: int | None = None) -> dict[int, list[Message]]:
    """Every message of every partition from offset 0 to the end (partition EOF), per partition.

    Fails on any consumer error other than EOF, and if the end of every partition is not reached in time.
    """
    got: dict[int, list[Message]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    with ck_consumer(bootstrap) as consumer:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            total = sum(map(len, got.values()))
            if len(at_end) == partitions and (expected is None or total >= expected):
                break
            for message in consumer.consume(num_messages=1000, timeout=0.3):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition())
                    continue
                at_end.discard(message.partition())
                got[message.partition()].append(message)
    assert len(at_end) == partitions, (
        f"reached the end of partitions {sorted(at_end)} of {partitions} within {timeout}s; "
        f"read {sum(map(len, got.values()))} messages")
    return got


def ck_flush(producer: Producer, timeout: float = 30.0) -> None:
    """Flush and insist nothing is left in the queue: a hang here is a broker that stopped answering."""
    left = producer.flush(timeout)
    assert left == 0, f"{left} messages still undelivered after {timeout}s"
