"""The Spark sink's transactional client against a real broker: KIP-939's prepare / complete, fencing, markers.

No Spark here: `pybroker.clients.spark.txn_producer` is plain Python over `pybroker.protocol`, and a stock
client (kafka-python, read_committed / read_uncommitted) checks what became visible.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kafka import TopicPartition
from kafka.admin import NewTopic

from pybroker.clients.spark.cluster import Cluster, Timeouts
from pybroker.clients.spark.exactly_once import last_committed_batch
from pybroker.clients.spark.txn_producer import (
    BrokerError,
    NotPrepared,
    TransactionalProducer,
    abort_open,
    complete_prepared,
)
from pybroker.clients.wire import Unsupported
from pybroker.protocol.partitioner import partition_for_key
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_admin, kp_consumer, kp_wait_for_topic

pytestmark = pytest.mark.integration

TWO_PC = {"transaction.two.phase.commit.enable": "true"}
FAST = Timeouts(request_s=10, operation_s=30)


def _cluster(broker: BrokerProcess) -> Cluster:
    return Cluster([broker.bootstrap], FAST)


def _topic(broker: BrokerProcess, name: str, partitions: int) -> str:
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    kp_wait_for_topic(broker.bootstrap, name)
    return name


def _read(broker: BrokerProcess, topic: str, partitions: int, isolation: str, expected: int,
          wait_s: float = 15.0) -> list[tuple[int, bytes, bytes]]:
    """Records from the start until `expected` arrived or `wait_s` passed (a check that nothing is visible
    waits the short time a read of data that is there would take, not the long deadline)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    got: list[tuple[int, bytes, bytes]] = []
    with kp_consumer(broker.bootstrap, isolation_level=isolation) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(got) < expected:
            for records in consumer.poll(timeout_ms=300).values():
                got += [(r.partition, r.key, r.value) for r in records]
        end = consumer.end_offsets(tps)
    assert sum(end.values()) >= len(got)
    return sorted(got)


def test_a_prepared_transaction_is_committed_by_another_client(broker_factory: Callable[..., BrokerProcess],
                                                                new_topic: Callable[..., str]) -> None:
    broker = broker_factory(TWO_PC)
    topic = _topic(broker, new_topic(), 3)
    producer = TransactionalProducer(_cluster(broker), "spark.q.0.0")
    prepared = producer.init(enable_2pc=True)
    for i in range(100):
        producer.send(topic, None, f"k{i}".encode(), f"v{i}".encode())
    producer.flush()
    producer.commit_offsets("spark.q.0", {(topic, 0): (0, "batch 0")})
    producer.cluster.close()
    assert _read(broker, topic, 3, "read_committed", 1, wait_s=2) == []  # prepared: not visible yet

    complete_prepared(_cluster(broker), "spark.q.0.0", prepared, commit=True)
    got = _read(broker, topic, 3, "read_committed", 100)
    assert sorted(v for _, _, v in got) == sorted(f"v{i}".encode() for i in range(100))
    assert all(p == partition_for_key(k, 3) for p, k, _ in got), "Kafka's default partitioner"
    assert last_committed_batch(_cluster(broker), "spark.q.0") == 0


def test_a_retried_attempt_fences_and_aborts_the_first(broker_factory: Callable[..., BrokerProcess],
                                                       new_topic: Callable[..., str]) -> None:
    broker = broker_factory(TWO_PC)
    topic = _topic(broker, new_topic(), 1)
    first = TransactionalProducer(_cluster(broker), "spark.q.0.1")
    stale = first.init(enable_2pc=True)
    first.send(topic, 0, None, b"attempt 0")
    first.flush()

    second = TransactionalProducer(_cluster(broker), "spark.q.0.1")
    live = second.init(enable_2pc=True)  # retried until the first attempt's transaction is aborted
    second.send(topic, 0, None, b"attempt 1")
    second.flush()
    with pytest.raises(BrokerError, match=r"PRODUCER_FENCED|INVALID_PRODUCER_EPOCH"):
        first.send(topic, 0, None, b"zombie")
        first.flush()
    first.cluster.close()
    second.cluster.close()

    complete_prepared(_cluster(broker), "spark.q.0.1", live, commit=True)
    assert [v for *_, v in _read(broker, topic, 1, "read_committed", 1)] == [b"attempt 1"]
    assert [v for *_, v in _read(broker, topic, 1, "read_uncommitted", 2)] == [b"attempt 0", b"attempt 1"]
    with pytest.raises(NotPrepared, match="no open transaction"):
        complete_prepared(_cluster(broker), "spark.q.0.1", stale, commit=True)


def test_abort_open_aborts_a_prepared_transaction(broker_factory: Callable[..., BrokerProcess],
                                                  new_topic: Callable[..., str]) -> None:
    broker = broker_factory(TWO_PC)
    topic = _topic(broker, new_topic(), 1)
    producer = TransactionalProducer(_cluster(broker), "spark.q.0.2")
    producer.init(enable_2pc=True)
    producer.send(topic, 0, b"k", b"v")
    producer.flush()
    producer.cluster.close()
    abort_open(_cluster(broker), "spark.q.0.2")
    assert _read(broker, topic, 1, "read_committed", 1, wait_s=2) == []
    assert len(_read(broker, topic, 1, "read_uncommitted", 1)) == 1


def test_two_phase_commit_refused_by_the_broker_names_its_key(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory()
    # as Kafka, a broker with two-phase commit off does not advertise InitProducerId v6 at all
    with pytest.raises(Unsupported, match=r"InitProducerId v0-5.*transaction\.two\.phase\.commit\.enable=true"):
        TransactionalProducer(_cluster(broker), "spark.q.0.3").init(enable_2pc=True)
