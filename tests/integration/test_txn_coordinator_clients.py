"""Transactions with stock clients against a real broker: kafka-python, confluent-kafka and aiokafka
producers commit and abort, read_committed consumers see only what was committed (read_uncommitted see
everything), a second producer with the same transactional id fences the first, a transaction left
open past its timeout is aborted by the coordinator, and a `kill -9` of the broker between an EndTxn's
prepare record and its markers is completed by the restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaException
from kafka import TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import (
    ck_consumer,
    ck_flush,
    ck_producer,
    kp_admin,
    kp_consumer,
    kp_producer,
    kp_wait_for_topic,
)

pytestmark = [pytest.mark.integration]

TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
}
READ_S = 15.0


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("txn-broker"), TXN_OVERRIDES).start()
    try:
        yield proc
    finally:
        if proc.is_running():
            proc.stop(expect_code=0)
        proc.close()


def _create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    with kp_admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    kp_wait_for_topic(bootstrap, topic)


def kp_values(bootstrap: str, topic: str, partitions: int, isolation: str, *, settle_s: float = 1.5,
              expected: int | None = None) -> list[bytes]:
    """Every value from offset 0, read under `isolation` until `expected` arrived or `settle_s` passed
    with nothing new."""
    values: list[bytes] = []
    with kp_consumer(bootstrap, isolation_level=isolation) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + READ_S
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            if expected is not None and len(values) >= expected:
                break
            batch = consumer.poll(timeout_ms=200)
            got = [r.value for records in batch.values() for r in records]
            if got:
                values += got
                quiet_since = time.monotonic()
            elif expected is None and time.monotonic() - quiet_since > settle_s:
                break
    return values


def _check_isolation(bootstrap: str, topic: str, committed: list[bytes], aborted: list[bytes]) -> None:
    seen_committed = kp_values(bootstrap, topic, 2, "read_committed", expected=len(committed))
    assert sorted(seen_committed) == sorted(committed)
    assert not set(kp_values(bootstrap, topic, 2, "read_committed")) & set(aborted)
    seen_all = kp_values(bootstrap, topic, 2, "read_uncommitted", expected=len(committed) + len(aborted))
    assert sorted(seen_all) == sorted(committed + aborted)


# -- kafka-python ----------------------------------------------------------------------------------------
def test_kafka_python_commit_and_abort(txn_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(txn_broker.bootstrap, topic)
    committed = [f"c{i}".encode() for i in range(20)]
    aborted = [f"a{i}".encode() for i in range(10)]
    with kp_producer(txn_broker.bootstrap, transactional_id=f"kp-{topic}") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i, value in enumerate(committed):
            producer.send(topic, value, partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i, value in enumerate(aborted):
            producer.send(topic, value, partition=i % 2)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()  # the id goes on after an abort
        producer.send(topic, b"after", partition=0)
        producer.commit_transaction()
    _check_isolation(txn_broker.bootstrap, topic, [*committed, b"after"], aborted)


def test_kafka_python_send_offsets_to_transaction(txn_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    from kafka.structs import OffsetAndMetadata

    topic = new_topic()
    _create(txn_broker.bootstrap, topic)
    group = f"g-{topic}"
    with kp_producer(txn_broker.bootstrap, transactional_id=f"kp-off-{topic}") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"out", partition=0)
        producer.send_offsets_to_transaction({TopicPartition(topic, 1): OffsetAndMetadata(7, "", -1)}, group)
        producer.commit_transaction()
    assert kp_values(txn_broker.bootstrap, topic, 2, "read_committed", expected=1) == [b"out"]


def test_a_second_producer_fences_the_first(txn_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(txn_broker.bootstrap, topic)
    txn_id = f"fence-{topic}"
    with kp_producer(txn_broker.bootstrap, transactional_id=txn_id) as old, \
            kp_producer(txn_broker.bootstrap, transactional_id=txn_id) as new:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"old", partition=0)
        old.flush()
        new.init_transactions()  # aborts the old producer's open transaction and bumps the epoch
        new.begin_transaction()
        new.send(topic, b"new", partition=0)
        new.commit_transaction()
        with pytest.raises((ProducerFencedError, InvalidProducerEpochError, KafkaError)):
            old.send(topic, b"late", partition=0).get(timeout=10)
            old.commit_transaction()
    assert kp_values(txn_broker.bootstrap, topic, 2, "read_committed", expected=1) == [b"new"]
    assert b"late" not in kp_values(txn_broker.bootstrap, topic, 2, "read_committed")


def test_a_transaction_past_its_timeout_is_aborted(txn_broker: BrokerProcess,
                                                   new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(txn_broker.bootstrap, topic)
    with kp_producer(txn_broker.bootstrap, transactional_id=f"slow-{topic}",
                     transaction_timeout_ms=1000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"stale", partition=0)
        producer.flush()
        time.sleep(3)  # the coordinator's check runs every 200 ms: the transaction is aborted and fenced
        with pytest.raises(KafkaError):
            producer.commit_transaction()
    # the abort marker moved the last stable offset: a later committed write is readable past it
    with kp_producer(txn_broker.bootstrap, transactional_id=f"next-{topic}") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"fresh", partition=0)
        producer.commit_transaction()
    assert kp_values(txn_broker.bootstrap, topic, 2, "read_committed", expected=1) == [b"fresh"]
    assert sorted(kp_values(txn_broker.bootstrap, topic, 2, "read_uncommitted", expected=2)) == [b"fresh", b"stale"]


# -- confluent-kafka ------------------------------------------------------------------------------------
def ck_values(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> list[bytes]:
    from confluent_kafka import TopicPartition as CkTopicPartition

    values: list[bytes] = []
    with ck_consumer(bootstrap, **{"isolation.level": isolation}) as consumer:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + READ_S
        while len(values) < expected and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=100, timeout=0.2):
                if message.error() is None:
                    values.append(message.value())
    return values


def test_confluent_kafka_commit_and_abort(txn_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(txn_broker.bootstrap, topic)
    producer = ck_producer(txn_broker.bootstrap, **{"transactional.id": f"ck-{topic}"})
    producer.init_transactions(15)
    producer.begin_transaction()
    committed = [f"c{i}".encode() for i in range(20)]
    for i, value in enumerate(committed):
        producer.produce(topic, value, partition=i % 2)
    producer.commit_transaction(15)
    producer.begin_transaction()
    aborted = [f"a{i}".encode() for i in range(10)]
    for i, value in enumerate(aborted):
        producer.produce(topic, value, partition=i % 2)
    ck_flush(producer)
    producer.abort_transaction(15)
    assert sorted(ck_values(txn_broker.bootstrap, topic, 2, "read_committed", len(committed))) == sorted(committed)
    everything = ck_values(txn_broker.bootstrap, topic, 2, "read_uncommitted", len(committed) + len(aborted))
    assert sorted(everything) == sorted(committed + aborted)
    _check_isolation(txn_broker.bootstrap, topic, committed, aborted)


def test_confluent_kafka_older_producer_is_fenced(txn_broker: BrokerProcess,
                                                  new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(txn_broker.bootstrap, topic)
    old = ck_producer(txn_broker.bootstrap, **{"transactional.id": f"ck-fence-{topic}"})
    old.init_transactions(15)
    old.begin_transaction()
    old.produce(topic, b"old", partition=0)
    ck_flush(old)
    new = ck_producer(txn_broker.bootstrap, **{"transactional.id": f"ck-fence-{topic}"})
    new.init_transactions(15)
    with pytest.raises(KafkaException):
        old.produce(topic, b"late", partition=0)
        old.commit_transaction(15)
    new.begin_transaction()
    new.produce(topic, b"new", partition=0)
    new.commit_transaction(15)
    assert ck_values(txn_broker.bootstrap, topic, 2, "read_committed", 1) == [b"new"]


# -- aiokafka ----------------------------------------------------------------------------------------------
def test_aiokafka_commit_and_abort(txn_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _create(txn_broker.bootstrap, topic)
    committed = [f"c{i}".encode() for i in range(10)]
    aborted = [f"a{i}".encode() for i in range(5)]

    async def run() -> tuple[list[bytes], list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=f"aio-{topic}",
                                    request_timeout_ms=10_000)
        await producer.start()
        try:
            async with producer.transaction():
                for i, value in enumerate(committed):
                    await producer.send_and_wait(topic, value, partition=i % 2)
            await producer.begin_transaction()
            for i, value in enumerate(aborted):
                await producer.send_and_wait(topic, value, partition=i % 2)
            await producer.abort_transaction()
        finally:
            await producer.stop()
        return await aio_values("read_committed", len(committed)), \
            await aio_values("read_uncommitted", len(committed) + len(aborted))

    async def aio_values(isolation: str, expected: int) -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=txn_broker.bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, request_timeout_ms=10_000)
        await consumer.start()
        values: list[bytes] = []
        try:
            tps = [AioTopicPartition(topic, p) for p in range(2)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + READ_S
            while len(values) < expected and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=200)
                values += [r.value for records in batch.values() for r in records if r.value is not None]
        finally:
            await consumer.stop()
        return values

    seen_committed, seen_all = asyncio.run(run())
    assert sorted(seen_committed) == sorted(committed)
    assert sorted(seen_all) == sorted(committed + aborted)


# -- a crash between prepare and complete --------------------------------------------------------------------
@pytest.mark.slow
def test_kill_9_between_prepare_and_markers_is_completed_by_the_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # markers wait a minute after PrepareCommit is durable: the broker dies in that window, deterministically
    monkeypatch.setenv("PYBROKER_TEST_TXN_MARKER_DELAY_MS", "60000")
    proc = BrokerProcess(tmp_path / "crash", TXN_OVERRIDES).start()
    try:
        topic = "crash-topic"
        _create(proc.bootstrap, topic)
        values = [f"v{i}".encode() for i in range(10)]
        with kp_producer(proc.bootstrap, transactional_id="crash-txn") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.send(topic, value, partition=i % 2)
            producer.commit_transaction()  # answered: PrepareCommit is on disk, no marker yet
            assert kp_values(proc.bootstrap, topic, 2, "read_committed", settle_s=0.5) == []
            proc.kill9()
        monkeypatch.delenv("PYBROKER_TEST_TXN_MARKER_DELAY_MS")
        proc.restart()
        assert sorted(kp_values(proc.bootstrap, topic, 2, "read_committed", expected=len(values))) == sorted(values)
        # and the id goes on: the next producer is not refused
        with kp_producer(proc.bootstrap, transactional_id="crash-txn") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"next", partition=0)
            producer.commit_transaction()
        assert len(kp_values(proc.bootstrap, topic, 2, "read_committed", expected=len(values) + 1)) == \
            len(values) + 1
    finally:
        proc.close()


# -- KIP-939: a prepared two-phase transaction outlives its producer and the broker --------------------------
@pytest.mark.slow
def test_a_prepared_two_phase_transaction_survives_kill_9_and_is_committed_by_a_new_client(tmp_path: Path) -> None:
    from pybroker.protocol.messages.add_partitions_to_txn import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnTopic,
    )
    from pybroker.protocol.messages.end_txn import EndTxnRequest
    from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
    from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
    from pybroker.protocol.records.record import Record, build_batch
    from tests.integration.hostile import RawClient

    proc = BrokerProcess(tmp_path / "2pc", {**TXN_OVERRIDES, "transaction.two.phase.commit.enable": "true",
                                            "transaction.max.timeout.ms": "1000"}).start()
    try:
        topic, txn_id = "prepared", "spark-task-7"
        _create(proc.bootstrap, topic, 1)
        with RawClient(proc.host, proc.port) as client:
            init = client.call(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60_000,
                                                     enable_2pc=True), 6)
            assert init is not None and init.error_code == 0  # no timeout: the maximum does not apply
            pid, epoch = init.producer_id, init.producer_epoch
            added = client.call(AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])]), 3)
            assert added is not None
            batch = build_batch([Record(i, 0, None, f"row-{i}".encode()) for i in range(5)], producer_id=pid,
                                producer_epoch=epoch, base_sequence=0, is_transactional=True)
            produced = client.call(ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
                TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]), 9)
            assert produced is not None and produced.responses[0].partition_responses[0].error_code == 0
        time.sleep(1.5)  # past transaction.max.timeout.ms: a two-phase transaction is not aborted
        proc.kill9()
        proc.restart()
        assert kp_values(proc.bootstrap, topic, 1, "read_committed", settle_s=0.5) == []
        with RawClient(proc.host, proc.port) as client:
            resumed = client.call(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60_000,
                                                        enable_2pc=True, keep_prepared_txn=True), 6)
            assert resumed is not None and resumed.error_code == 0
            assert (resumed.ongoing_txn_producer_id, resumed.ongoing_txn_producer_epoch) == (pid, epoch)
            ended = client.call(EndTxnRequest(transactional_id=txn_id, producer_id=resumed.producer_id,
                                              producer_epoch=resumed.producer_epoch, committed=True), 5)
            assert ended is not None and ended.error_code == 0
        assert kp_values(proc.bootstrap, topic, 1, "read_committed", expected=5) == \
            [f"row-{i}".encode() for i in range(5)]
    finally:
        proc.close()
