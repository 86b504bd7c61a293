"""The sink's transactional client against an in-memory broker: the protocol steps, fencing, 2PC, retries."""

from __future__ import annotations

import random

import pytest

from pybroker.clients.spark.cluster import Cluster, Timeouts
from pybroker.clients.spark.txn_producer import (
    BrokerError,
    NotPrepared,
    ProducerIdentity,
    TransactionalProducer,
    abort_open,
    complete_prepared,
)
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.partitioner import partition_for_key
from tests.unit.clients.spark.fake_broker import FakeBroker

FAST = Timeouts(request_s=1, operation_s=2, backoff_s=0.001, max_backoff_s=0.002)


def _cluster(broker: FakeBroker) -> Cluster:
    return Cluster(["fake:1"], FAST, connect=broker.connect)


def _producer(broker: FakeBroker, tid: str = "t.job.0.0", **kwargs: int) -> TransactionalProducer:
    return TransactionalProducer(_cluster(broker), tid, clock=lambda: 1_700_000_000.0, rng=random.Random(7),
                                 **kwargs)


def test_rows_are_invisible_until_the_driver_commits_the_prepared_transaction() -> None:
    broker = FakeBroker({"out": 3})
    producer = _producer(broker)
    identity = producer.init(enable_2pc=True)
    for i in range(50):
        producer.send("out", None, f"k{i % 5}".encode(), f"v{i}".encode())
    producer.flush()
    assert producer.records_sent == 50 and broker.committed == []
    assert "EndTxn" not in broker.calls

    complete_prepared(_cluster(broker), "t.job.0.0", identity, commit=True)
    assert sorted(v for *_, v in broker.committed) == sorted(f"v{i}".encode() for i in range(50))
    for topic, partition, key, _ in broker.committed:
        assert topic == "out" and key is not None and partition == partition_for_key(key, 3)


def test_a_retried_attempt_fences_the_first_and_only_its_rows_commit() -> None:
    broker = FakeBroker({"out": 1})
    first = _producer(broker)
    first_identity = first.init(enable_2pc=True)
    first.send("out", 0, None, b"from attempt 0")
    first.flush()  # attempt 0 "dies" here, its transaction open

    second = _producer(broker)
    second_identity = second.init(enable_2pc=True)  # fences attempt 0 and aborts its transaction
    assert broker.aborted == [("out", 0, None, b"from attempt 0")]
    second.send("out", 0, None, b"from attempt 1")
    second.flush()

    with pytest.raises(BrokerError, match="PRODUCER_FENCED"):  # the zombie cannot write any more
        first.send("out", 0, None, b"zombie")
        first.flush()
    with pytest.raises(NotPrepared, match="another attempt fenced it"):  # nor be committed by a stale message
        complete_prepared(_cluster(broker), "t.job.0.0", first_identity, commit=True)
    assert broker.committed == []
    # ... and that refusal aborted what was open, so a commit of the live message finds nothing prepared either
    with pytest.raises(NotPrepared):
        complete_prepared(_cluster(broker), "t.job.0.0", second_identity, commit=True)


def test_the_driver_commits_with_the_identity_its_message_carries() -> None:
    broker = FakeBroker({"out": 1})
    producer = _producer(broker)
    identity = producer.init(enable_2pc=True)
    producer.send("out", 0, b"k", b"v")
    producer.flush()
    complete_prepared(_cluster(broker), "t.job.0.0", identity, commit=True)
    assert broker.committed == [("out", 0, b"k", b"v")]


def test_abort_open_aborts_what_a_task_left() -> None:
    broker = FakeBroker({"out": 1})
    producer = _producer(broker)
    producer.init(enable_2pc=True)
    producer.send("out", 0, b"k", b"v")
    producer.flush()
    abort_open(_cluster(broker), "t.job.0.0")
    assert broker.aborted == [("out", 0, b"k", b"v")] and broker.committed == []


def test_partitions_are_added_once_and_sequences_continue_across_batches() -> None:
    broker = FakeBroker({"out": 2})
    producer = _producer(broker, batch_bytes=100)
    identity = producer.init(enable_2pc=False)
    for i in range(40):
        producer.send("out", i % 2, None, b"x" * 30)
    producer.flush()
    assert broker.calls.count("AddPartitionsToTxn") == 1
    pid, epoch = identity.producer_id, identity.epoch
    assert broker.sequences == {(pid, epoch, "out", 0): 20, (pid, epoch, "out", 1): 20}
    producer.end(commit=True)
    assert len(broker.committed) == 40


@pytest.mark.parametrize("api", ["InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn", "FindCoordinator"])
@pytest.mark.parametrize("code", [ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                  ErrorCode.NOT_COORDINATOR])
def test_retriable_errors_are_retried(api: str, code: ErrorCode) -> None:
    broker = FakeBroker({"out": 1})
    keys = {"InitProducerId": 22, "AddPartitionsToTxn": 24, "Produce": 0, "EndTxn": 26, "FindCoordinator": 10}
    broker.fail[keys[api]].extend([code, code])
    producer = _producer(broker)
    producer.init(enable_2pc=False)
    producer.send("out", 0, b"k", b"v")
    producer.end(commit=True)
    assert broker.committed == [("out", 0, b"k", b"v")]


def test_a_produce_retried_after_it_was_applied_is_not_written_twice() -> None:
    broker = FakeBroker({"out": 1})
    producer = _producer(broker)
    identity = producer.init(enable_2pc=False)
    producer.send("out", 0, b"k", b"v")
    producer._seal(("out", 0))
    producer._add_partitions([("out", 0)])
    batch = producer._ready[("out", 0)][0][1]
    broker._Produce(_request(producer, batch), 11)  # the broker applied it, but its answer was "lost"
    producer.flush()  # resends the same batch with the same sequence: a duplicate, acknowledged
    producer.end(commit=True)
    assert broker.committed == [("out", 0, b"k", b"v")]
    assert broker.sequences[(identity.producer_id, identity.epoch, "out", 0)] == 1


def _request(producer: TransactionalProducer, batch: bytes):  # type: ignore[no-untyped-def]
    from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData

    return ProduceRequest(transactional_id=producer.transactional_id, acks=-1, timeout_ms=1000, topic_data=[
        TopicProduceData(name="out", partition_data=[PartitionProduceData(index=0, records=batch)])])


def test_a_non_retriable_error_names_the_request_and_the_error() -> None:
    broker = FakeBroker({"out": 1})
    broker.fail[22].append(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    with pytest.raises(BrokerError, match=r"InitProducerId\('t.job.0.0'\): TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        _producer(broker).init(enable_2pc=True)


def test_retries_stop_at_the_deadline_with_the_last_error() -> None:
    broker = FakeBroker({"out": 1})
    broker.fail[22].extend([ErrorCode.CONCURRENT_TRANSACTIONS] * 10_000)
    with pytest.raises(TimeoutError, match=r"still failing after 2 s; last error: .*CONCURRENT_TRANSACTIONS"):
        _producer(broker).init(enable_2pc=True)


def test_two_phase_commit_needs_init_producer_id_v6() -> None:
    from pybroker.clients.wire import Unsupported

    broker = FakeBroker({"out": 1}, max_init_version=5)
    with pytest.raises(Unsupported, match="needs v6 or later"):
        _producer(broker).init(enable_2pc=True)


def test_offsets_commit_with_the_transaction() -> None:
    broker = FakeBroker({"out": 1})
    producer = _producer(broker)
    identity = producer.init(enable_2pc=True)
    producer.send("out", 0, b"k", b"v")
    producer.flush()
    producer.commit_offsets("g", {("out", 0): (7, "meta")})
    assert broker.offsets == {}
    complete_prepared(_cluster(broker), "t.job.0.0", identity, commit=True)
    assert broker.offsets == {("g", "out", 0): 7}


def test_null_keys_stick_to_one_partition_per_batch() -> None:
    broker = FakeBroker({"out": 4})
    producer = _producer(broker, batch_bytes=10_000)
    producer.init(enable_2pc=False)
    where = {producer.send("out", None, None, b"v") for _ in range(20)}
    assert len(where) == 1


def test_a_record_larger_than_a_request_is_refused_before_sending() -> None:
    broker = FakeBroker({"out": 1})
    producer = _producer(broker, max_request_bytes=1000)
    producer.init(enable_2pc=False)
    with pytest.raises(BrokerError, match="MESSAGE_TOO_LARGE"):
        producer.send("out", 0, None, b"x" * 2000)
    assert "Produce" not in broker.calls and ProducerIdentity(1000, 0) == producer.identity


def test_a_batch_never_outgrows_a_request() -> None:
    broker = FakeBroker({"out": 1})
    producer = _producer(broker, batch_bytes=1_000_000, max_request_bytes=1000)
    producer.init(enable_2pc=False)
    for _ in range(10):
        producer.send("out", 0, None, b"x" * 300)
    producer.end(commit=True)
    assert len(broker.committed) == 10 and broker.calls.count("Produce") >= 4
