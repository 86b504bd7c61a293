"""Transactional producers and isolation-level readers of the three stock Python clients, for the
transaction tests and the transactional benchmark.

Why a module of its own: every transaction test asks the same two questions of a topic, "what does a
read_committed consumer see" and "what does a read_uncommitted one see", and each of kafka-python,
confluent-kafka (librdkafka) and aiokafka has its own fetch path (its own handling of aborted-transaction
lists, control batches and the last stable offset), so each is asked in its own words. Everything here
is bounded in time, as in `clients.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.clients import CK_COMMON, KP_CONSUMER, KP_PRODUCER, ck_admin, ck_producer

READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
ISOLATIONS = (READ_COMMITTED, READ_UNCOMMITTED)
CONSUMERS = ("kafka-python", "confluent-kafka", "aiokafka")
#: how long a reader keeps polling after the last record it saw before it decides it has everything
QUIET_S = 1.5
#: how long it keeps polling after reaching the count it expected: a record too many must show up too
EXTRA_S = 0.5
READ_TIMEOUT_S = 30.0
TXN_TIMEOUT_MS = 30_000
#: a small transaction log and offsets topic so a broker starts fast; groups form at once
TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = ck_admin(bootstrap)  # held in a name: a collected AdminClient cancels its futures
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(15)


# -- producers -------------------------------------------------------------------------------------------
def ck_txn_producer(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    """A librdkafka transactional producer, closed by the conftest's `close_clients()`."""
    return ck_producer(bootstrap, **{"transactional.id": transactional_id, "transaction.timeout.ms": TXN_TIMEOUT_MS,
                                     "linger.ms": 5, **config})


@contextlib.contextmanager
def kp_txn_producer(bootstrap: str, transactional_id: str, **config: Any) -> Iterator[KafkaProducer]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **{
        **KP_PRODUCER, "transactional_id": transactional_id, "transaction_timeout_ms": TXN_TIMEOUT_MS,
        "linger_ms": 5, **config})
    try:
        yield producer
    finally:
        producer.close(timeout=10)


@contextlib.asynccontextmanager
async def aio_txn_producer(bootstrap: str, transactional_id: str, **config: Any) -> Any:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                transaction_timeout_ms=TXN_TIMEOUT_MS, request_timeout_ms=10_000, linger_ms=5,
                                **config)
    await asyncio.wait_for(producer.start(), 20)
    try:
        yield producer
    finally:
        await asyncio.wait_for(producer.stop(), 20)


# -- readers ---------------------------------------------------------------------------------------------
def read_values(client: str, bootstrap: str, topic: str, partitions: int, isolation: str,
                expected: int | None = None, timeout: float = READ_TIMEOUT_S) -> list[bytes]:
    """Every value `client`'s consumer sees from offset 0 of each partition under `isolation`, in order per
    partition (partitions concatenated). Stops EXTRA_S after reaching `expected` values without news (so
    duplicates or leaked records past the count are still seen), else after QUIET_S without news."""
    readers = {"kafka-python": _kp_read, "confluent-kafka": _ck_read, "aiokafka": _aio_read}
    return readers[client](bootstrap, topic, partitions, isolation, expected, timeout)


def _done(got: int, expected: int | None, last_news: float, deadline: float) -> bool:
    now = time.monotonic()
    if now >= deadline:
        return True
    if expected is not None:
        return got >= expected and now - last_news >= EXTRA_S
    return now - last_news >= QUIET_S


def _kp_read(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int | None,
             timeout: float) -> list[bytes]:
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, **KP_CONSUMER)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline, last_news = time.monotonic() + timeout, time.monotonic()
        while not _done(sum(map(len, got.values())), expected, last_news, deadline):
            for tp, records in consumer.poll(timeout_ms=200).items():
                got[tp.partition] += [r.value for r in records]
                last_news = time.monotonic()
    finally:
        consumer.close()
    return [v for p in range(partitions) for v in got[p]]


def _ck_read(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int | None,
             timeout: float) -> list[bytes]:
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    consumer = Consumer({"bootstrap.servers": bootstrap, **CK_COMMON, "group.id": "pybroker-txn-tests-never-commit",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "isolation.level": isolation, "fetch.wait.max.ms": 200})
    try:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
        deadline, last_news = time.monotonic() + timeout, time.monotonic()
        while not _done(sum(map(len, got.values())), expected, last_news, deadline):
            for message in consumer.consume(num_messages=500, timeout=0.2):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    continue
                got[message.partition()].append(message.value())
                last_news = time.monotonic()
    finally:
        consumer.close()
    return [v for p in range(partitions) for v in got[p]]


def _aio_read(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int | None,
              timeout: float) -> list[bytes]:
    async def run() -> list[bytes]:
        got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, request_timeout_ms=10_000, fetch_max_wait_ms=200)
        await asyncio.wait_for(consumer.start(), 20)
        try:
            tps = [AioTopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline, last_news = time.monotonic() + timeout, time.monotonic()
            while not _done(sum(map(len, got.values())), expected, last_news, deadline):
                batches = await consumer.getmany(timeout_ms=200)
                for tp, records in batches.items():
                    got[tp.partition] += [r.value for r in records if r.value is not None]
                    last_news = time.monotonic()
        finally:
            await asyncio.wait_for(consumer.stop(), 20)
        return [v for p in range(partitions) for v in got[p]]

    return asyncio.run(run())


def read_committed_ck(bootstrap: str, topic: str, partitions: int, expected: int,
                      timeout: float = READ_TIMEOUT_S) -> list[bytes]:
    """What a read_committed librdkafka consumer sees, waiting for `expected` values."""
    return _ck_read(bootstrap, topic, partitions, READ_COMMITTED, expected, timeout)
