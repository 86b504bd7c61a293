"""`send_offsets_to_transaction` with stock transactional producers against the real broker process.

Each client commits a transaction holding the group's offsets (the group's committed offsets then show
them) and aborts another (they keep the committed ones); while a transaction is open, a read_committed
librdkafka consumer, which asks OffsetFetch for stable offsets, is answered UNSTABLE_OFFSET_COMMIT and
retries until the transaction ends. After a restart the committed offsets are still there.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from pybroker.broker.dispatch import load_handlers
from pybroker.protocol.api_keys import ApiKey
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import CK_COMMON, KP_PRODUCER, ck_producer, kp_admin
from tests.integration.conftest import BrokerFactory

OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5",
             "transaction.state.log.num.partitions": "5"}
PARTITIONS = 2


@pytest.fixture
def txn_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    if ApiKey.END_TXN not in load_handlers():
        pytest.skip("no transaction coordinator in this build")
    return broker_factory(overrides=OVERRIDES, needs_restart=True)


def _topic(bootstrap: str, name: str) -> str:
    with kp_admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    return name


def _consumer(bootstrap: str, group: str, **config: object) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, **CK_COMMON, "group.id": group, "enable.auto.commit": False,
                     **config})


def committed(bootstrap: str, group: str, topic: str, *, stable: bool = False, timeout: float = 10.0
              ) -> dict[int, int]:
    """The group's committed offsets of `topic`'s partitions (read_committed asks for stable ones)."""
    consumer = _consumer(bootstrap, group, **({"isolation.level": "read_committed"} if stable else
                                              {"isolation.level": "read_uncommitted"}))
    try:
        found = consumer.committed([CkTopicPartition(topic, p) for p in range(PARTITIONS)], timeout=timeout)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


@pytest.fixture
def ck_txn(txn_broker: BrokerProcess) -> Iterator[Callable[[str], object]]:
    def make(transactional_id: str) -> object:
        producer = ck_producer(txn_broker.bootstrap, **{"transactional.id": transactional_id,
                                                       "transaction.timeout.ms": 30_000})
        producer.init_transactions(20)
        return producer
    yield make


@pytest.mark.slow  # a restart
def test_confluent_send_offsets_commit_then_abort(txn_broker: BrokerProcess, new_topic: Callable[[str], str],
                                                  ck_txn: Callable[[str], object]) -> None:
    bootstrap = txn_broker.bootstrap
    source, sink = _topic(bootstrap, new_topic("in")), _topic(bootstrap, new_topic("out"))
    group = new_topic("group")
    producer = ck_txn(new_topic("tx"))
    metadata_source = _consumer(bootstrap, group)
    try:
        group_metadata = metadata_source.consumer_group_metadata()
    finally:
        metadata_source.close()

    producer.begin_transaction()  # type: ignore[attr-defined]
    producer.produce(sink, b"v1", partition=0)  # type: ignore[attr-defined]
    producer.send_offsets_to_transaction([CkTopicPartition(source, 0, 42), CkTopicPartition(source, 1, 7)],  # type: ignore[attr-defined]
                                         group_metadata, 20)
    # open: the group's committed offsets do not show them; a stable read is told to wait
    assert committed(bootstrap, group, source) == {0: -1001, 1: -1001}
    with pytest.raises(KafkaException):
        committed(bootstrap, group, source, stable=True, timeout=2)
    producer.commit_transaction(20)  # type: ignore[attr-defined]
    # EndTxn answers once the commit is prepared; the markers follow, so a plain read may still see the old
    # offsets for a moment, while a stable read waits for them (as against Kafka)
    assert committed(bootstrap, group, source, stable=True) == {0: 42, 1: 7}
    assert committed(bootstrap, group, source) == {0: 42, 1: 7}

    producer.begin_transaction()  # type: ignore[attr-defined]
    producer.produce(sink, b"v2", partition=0)  # type: ignore[attr-defined]
    producer.send_offsets_to_transaction([CkTopicPartition(source, 0, 99)], group_metadata, 20)  # type: ignore[attr-defined]
    producer.abort_transaction(20)  # type: ignore[attr-defined]
    assert committed(bootstrap, group, source, stable=True) == {0: 42, 1: 7}

    txn_broker.restart()
    assert committed(bootstrap, group, source, stable=True, timeout=20) == {0: 42, 1: 7}


def test_a_stable_read_waits_for_the_commit(txn_broker: BrokerProcess, new_topic: Callable[[str], str],
                                            ck_txn: Callable[[str], object]) -> None:
    """librdkafka retries UNSTABLE_OFFSET_COMMIT: a read started inside the transaction ends after it."""
    bootstrap = txn_broker.bootstrap
    source = _topic(bootstrap, new_topic("in"))
    group = new_topic("group")
    producer = ck_txn(new_topic("tx"))
    metadata_source = _consumer(bootstrap, group)
    try:
        group_metadata = metadata_source.consumer_group_metadata()
    finally:
        metadata_source.close()
    producer.begin_transaction()  # type: ignore[attr-defined]
    producer.send_offsets_to_transaction([CkTopicPartition(source, 0, 5)], group_metadata, 20)  # type: ignore[attr-defined]
    seen: list[dict[int, int]] = []
    reader = threading.Thread(target=lambda: seen.append(committed(bootstrap, group, source, stable=True,
                                                                   timeout=20)))
    reader.start()
    time.sleep(1.0)
    assert not seen  # still retrying
    producer.commit_transaction(20)  # type: ignore[attr-defined]
    reader.join(25)
    assert seen == [{0: 5, 1: -1001}]


def test_kafka_python_send_offsets_commit_then_abort(txn_broker: BrokerProcess,
                                                     new_topic: Callable[[str], str]) -> None:
    bootstrap = txn_broker.bootstrap
    source, sink = _topic(bootstrap, new_topic("in")), _topic(bootstrap, new_topic("out"))
    group = new_topic("group")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=new_topic("tx"), **KP_PRODUCER)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(sink, b"v1", partition=0)
        producer.send_offsets_to_transaction({TopicPartition(source, 0): OffsetAndMetadata(11, "", -1)}, group)
        producer.commit_transaction()
        assert committed(bootstrap, group, source, stable=True) == {0: 11, 1: -1001}  # waits for the markers
        producer.begin_transaction()
        producer.send_offsets_to_transaction({TopicPartition(source, 0): OffsetAndMetadata(12, "", -1),
                                              TopicPartition(source, 1): OffsetAndMetadata(3, "", -1)}, group)
        producer.abort_transaction()
        assert committed(bootstrap, group, source, stable=True) == {0: 11, 1: -1001}
    finally:
        producer.close(timeout=5)


def test_aiokafka_send_offsets_commit_then_abort(txn_broker: BrokerProcess, new_topic: Callable[[str], str]) -> None:
    bootstrap = txn_broker.bootstrap
    source = _topic(bootstrap, new_topic("in"))
    group = new_topic("group")

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=new_topic("tx"),
                                    request_timeout_ms=10_000)
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_offsets_to_transaction({AioTopicPartition(source, 1): 8}, group)
            assert committed(bootstrap, group, source, stable=True) == {0: -1001, 1: 8}  # waits for the markers
            await producer.begin_transaction()
            await producer.send_offsets_to_transaction({AioTopicPartition(source, 1): 9}, group)
            await producer.abort_transaction()
            assert committed(bootstrap, group, source, stable=True) == {0: -1001, 1: 8}
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.mark.slow  # a kill -9 and a restart
def test_an_open_transaction_survives_kill_9_and_is_aborted_by_the_next_producer(
        txn_broker: BrokerProcess, new_topic: Callable[[str], str], ck_txn: Callable[[str], object]) -> None:
    """The pending offsets are replayed as pending; the transactional id's next producer fences the old
    one, whose transaction the coordinator aborts: the group keeps the offsets committed before."""
    bootstrap = txn_broker.bootstrap
    source = _topic(bootstrap, new_topic("in"))
    group, transactional_id = new_topic("group"), new_topic("tx")
    metadata_source = _consumer(bootstrap, group)
    try:
        group_metadata = metadata_source.consumer_group_metadata()
    finally:
        metadata_source.close()
    producer = ck_txn(transactional_id)
    producer.begin_transaction()  # type: ignore[attr-defined]
    producer.send_offsets_to_transaction([CkTopicPartition(source, 0, 3)], group_metadata, 20)  # type: ignore[attr-defined]
    producer.commit_transaction(20)  # type: ignore[attr-defined]
    producer.begin_transaction()  # type: ignore[attr-defined]
    producer.send_offsets_to_transaction([CkTopicPartition(source, 0, 30)], group_metadata, 20)  # type: ignore[attr-defined]
    txn_broker.restart(kill=True)
    assert committed(bootstrap, group, source, timeout=20) == {0: 3, 1: -1001}
    with pytest.raises(KafkaException):  # still pending after the restart
        committed(bootstrap, group, source, stable=True, timeout=2)
    ck_txn(transactional_id)  # init_transactions: the open transaction is aborted
    assert committed(bootstrap, group, source, stable=True, timeout=20) == {0: 3, 1: -1001}
