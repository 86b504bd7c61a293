"""KIP-939 against a real broker: a prepared two-phase transaction outlives its timeout, its producer and a
`kill -9` of the broker, and a new client resumes and commits it.

The stock clients' transactions (commit, abort, isolation levels, fencing, timeouts, a crash between prepare
and markers) are in test_transactions.py, test_transactions_faults.py and test_txn_offsets.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import TopicPartition
from kafka.admin import NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import (
    kp_admin,
    kp_consumer,
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
