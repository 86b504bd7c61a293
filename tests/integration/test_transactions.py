"""Transactions with the stock clients: kafka-python, confluent-kafka and aiokafka transactional producers
commit and abort; read_committed consumers of all three see only committed records, read_uncommitted
consumers see every record, and an open transaction holds read_committed readers at its first offset (the
last stable offset) until it ends.

Each producer writes, on two partitions, a committed transaction, an aborted one and another committed one;
then every consumer reads the topic under both isolation levels.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.txn_clients import (
    CONSUMERS,
    ISOLATIONS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_OVERRIDES,
    aio_txn_producer,
    ck_txn_producer,
    create_topic,
    kp_txn_producer,
    read_values,
)

PARTITIONS = 2
PER_TXN = 20
@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory, broker_target: str) -> Iterator[BrokerProcess]:
    """One pybroker per module with a small transaction log (PYBROKER_TEST_TARGET=tansu: skipped, these
    tests need its config overrides)."""
    if broker_target != "pybroker":
        pytest.skip("transaction tests configure pybroker itself")
    proc = BrokerProcess(tmp_path_factory.mktemp("txn-broker"), TXN_OVERRIDES)
    proc.start()
    try:
        yield proc
    finally:
        if proc.is_running():
            proc.stop()
        proc.close()


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(PER_TXN)]


#: (transaction tag, committed?) in the order each producer runs them
PLAN = [("first", True), ("aborted", False), ("second", True)]


def _expected(isolation: str) -> list[bytes]:
    """Partition 0's values in offset order, then partition 1's: what a reader of `isolation` must see."""
    return [value for p in range(PARTITIONS) for tag, commit in PLAN if commit or isolation == READ_UNCOMMITTED
            for i, value in enumerate(_values(tag)) if i % PARTITIONS == p]


def _kafka_python_run(bootstrap: str, topic: str, txn_id: str) -> None:
    with kp_txn_producer(bootstrap, txn_id) as producer:
        producer.init_transactions()
        for tag, commit in PLAN:
            producer.begin_transaction()
            for i, value in enumerate(_values(tag)):
                producer.send(topic, value=value, partition=i % PARTITIONS)
            producer.flush(timeout=20)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()


def _confluent_run(bootstrap: str, topic: str, txn_id: str) -> None:
    producer = ck_txn_producer(bootstrap, txn_id)
    producer.init_transactions(20)
    for tag, commit in PLAN:
        producer.begin_transaction()
        for i, value in enumerate(_values(tag)):
            producer.produce(topic, value=value, partition=i % PARTITIONS)
        assert producer.flush(20) == 0
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)


def _aiokafka_run(bootstrap: str, topic: str, txn_id: str) -> None:
    async def run() -> None:
        async with aio_txn_producer(bootstrap, txn_id) as producer:
            for tag, commit in PLAN:
                await producer.begin_transaction()
                sends = [await producer.send(topic, value=value, partition=i % PARTITIONS)
                         for i, value in enumerate(_values(tag))]
                await asyncio.wait_for(asyncio.gather(*sends), 20)
                if commit:
                    await asyncio.wait_for(producer.commit_transaction(), 20)
                else:
                    await asyncio.wait_for(producer.abort_transaction(), 20)

    asyncio.run(run())


PRODUCERS: dict[str, Callable[[str, str, str], None]] = {
    "kafka-python": _kafka_python_run, "confluent-kafka": _confluent_run, "aiokafka": _aiokafka_run}


@pytest.mark.slow
@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_commit_and_abort_seen_by_every_consumer_per_isolation_level(
        txn_broker: BrokerProcess, new_topic: Callable[..., str], producer: str) -> None:
    topic = new_topic()
    create_topic(txn_broker.bootstrap, topic, PARTITIONS)
    PRODUCERS[producer](txn_broker.bootstrap, topic, f"txn-{topic}")
    for consumer in CONSUMERS:
        for isolation in ISOLATIONS:
            expected = _expected(isolation)
            got = read_values(consumer, txn_broker.bootstrap, topic, PARTITIONS, isolation, expected=len(expected))
            assert got == expected, f"{producer} -> {consumer} {isolation}: {got[:6]}..."


@pytest.mark.slow
def test_open_transaction_holds_read_committed_readers_at_its_first_offset(
        txn_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    """Records after an open transaction's first offset, even committed ones of another producer, stay
    invisible to read_committed until it ends; read_uncommitted readers see them at once."""
    topic = new_topic()
    create_topic(txn_broker.bootstrap, topic, 1)
    bootstrap = txn_broker.bootstrap
    before, opened, after = b"before", [b"open-0", b"open-1"], b"after-open"
    committer = ck_txn_producer(bootstrap, f"committer-{topic}")
    committer.init_transactions(20)
    committer.begin_transaction()
    committer.produce(topic, value=before, partition=0)
    committer.commit_transaction(20)

    holder = ck_txn_producer(bootstrap, f"holder-{topic}")
    holder.init_transactions(20)
    holder.begin_transaction()
    for value in opened:
        holder.produce(topic, value=value, partition=0)
    assert holder.flush(20) == 0  # on the log, not committed

    committer.begin_transaction()
    committer.produce(topic, value=after, partition=0)
    committer.commit_transaction(20)

    for consumer in CONSUMERS:
        assert read_values(consumer, bootstrap, topic, 1, READ_COMMITTED) == [before], consumer
        assert read_values(consumer, bootstrap, topic, 1, READ_UNCOMMITTED, expected=4) == [before, *opened, after]

    holder.commit_transaction(20)
    deadline = time.monotonic() + 10
    for consumer in CONSUMERS:
        got = read_values(consumer, bootstrap, topic, 1, READ_COMMITTED, expected=4,
                          timeout=max(1.0, deadline - time.monotonic()))
        assert got == [before, *opened, after], consumer
