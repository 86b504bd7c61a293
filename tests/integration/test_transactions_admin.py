"""The transaction admin APIs (ListTransactions, DescribeTransactions, DescribeProducers, WriteTxnMarkers)
through kafka-python's admin client and `pybroker transactions ...`, and the hanging-transaction recovery
kafka-transactions.sh exists for: find the partition a coordinator forgot, abort it by start offset, and
read_committed readers move on.

confluent-kafka's AdminClient (2.16) has none of these calls (librdkafka does not implement them), so the
stock clients here are kafka-python's admin and our CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result
from kafka import TopicPartition
from kafka.admin import AbortTransactionSpec
from kafka.errors import KafkaError as KpKafkaError

from pybroker.clients.admin.commands import transactions as transactions_group
from pybroker.clients.wire import WireClient
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.integration.brokers import REPO_ROOT, BrokerProcess
from tests.integration.clients import ck_producer, kp_admin
from tests.integration.test_transactions import txn_broker  # noqa: F401 (the module's shared broker)
from tests.integration.txn_clients import (
    READ_COMMITTED,
    TXN_OVERRIDES,
    create_topic,
    kp_txn_producer,
    read_values,
)


def pybroker(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command line, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "pybroker.broker.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT, check=False)


def transactions(*args: str) -> Result:
    """`pybroker transactions ARGS` in this process (an interpreter start per call costs a second here)."""
    return CliRunner().invoke(transactions_group, list(args))


def cli(broker: BrokerProcess, *args: str) -> Any:
    """`pybroker transactions ARGS --json` against the broker; it must succeed."""
    result = transactions(*args, "--bootstrap-server", broker.bootstrap, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def open_transaction(txn_broker: BrokerProcess, new_topic: Callable[..., str]  # noqa: F811
                     ) -> Iterator[tuple[str, str, Any]]:
    """A kafka-python producer with a transaction open on partitions 0 and 1 of a new topic."""
    topic = new_topic()
    create_topic(txn_broker.bootstrap, topic, 2)
    txn_id = f"admin-{topic}"
    with kp_txn_producer(txn_broker.bootstrap, txn_id) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, value=f"open-{i}".encode(), partition=i % 2)
        producer.flush(timeout=20)
        yield topic, txn_id, producer


def test_kafka_python_admin_lists_describes_and_aborts(txn_broker: BrokerProcess,  # noqa: F811
                                                       open_transaction: tuple[str, str, Any]) -> None:
    topic, txn_id, producer = open_transaction
    with kp_admin(txn_broker.bootstrap) as admin:
        listings = [t for ts in admin.list_transactions().values() for t in ts]
        mine = next(t for t in listings if t.transactional_id == txn_id)
        assert mine.state.value == "Ongoing"
        by_state = {t.transactional_id for ts in admin.list_transactions(state_filters=["Ongoing"]).values()
                    for t in ts}
        assert txn_id in by_state
        assert txn_id not in {t.transactional_id for ts in admin.list_transactions(
            state_filters=["CompleteCommit"]).values() for t in ts}
        assert [t.transactional_id for ts in admin.list_transactions(
            producer_id_filters=[mine.producer_id]).values() for t in ts] == [txn_id]
        assert [t.transactional_id for ts in admin.list_transactions(
            transactional_id_pattern=f"admin-{topic[:20]}.*").values() for t in ts] == [txn_id]
        assert txn_id not in {t.transactional_id for ts in admin.list_transactions(
            duration_filter_ms=3_600_000).values() for t in ts}  # began moments ago

        described = admin.describe_transactions([txn_id])[txn_id]
        assert described.state.value == "Ongoing"
        assert described.producer_id == mine.producer_id
        assert described.topic_partitions == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        assert described.transaction_start_time_ms > 0
        with pytest.raises(KpKafkaError):
            admin.describe_transactions([f"never-{topic}"])

        states = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        for partition in (0, 1):
            [active] = states[TopicPartition(topic, partition)].active_producers
            assert active.producer_id == mine.producer_id
            assert active.current_transaction_start_offset == 0

        active = states[TopicPartition(topic, 1)].active_producers[0]
        admin.abort_transaction(AbortTransactionSpec(TopicPartition(topic, 1), active.producer_id,
                                                     active.producer_epoch, max(active.coordinator_epoch, 0)))
        after = admin.describe_producers([TopicPartition(topic, 1)])[TopicPartition(topic, 1)]
        assert all(p.current_transaction_start_offset == -1 for p in after.active_producers)
    # partition 1's open records were aborted by hand; the producer's commit still ends partition 0's
    producer.commit_transaction()
    assert sorted(read_values("kafka-python", txn_broker.bootstrap, topic, 2, READ_COMMITTED)) == [b"open-0", b"open-2"]


def test_cli_lists_describes_and_shows_producers(txn_broker: BrokerProcess,  # noqa: F811
                                                 open_transaction: tuple[str, str, Any]) -> None:
    topic, txn_id, producer = open_transaction
    listed = {row["transactional_id"]: row for row in cli(txn_broker, "list")}
    assert listed[txn_id]["state"] == "Ongoing"
    assert [row["transactional_id"] for row in cli(txn_broker, "list", "--state", "Ongoing",
                                                   "--transactional-id-pattern", f"admin-{topic}")] == [txn_id]
    [described] = cli(txn_broker, "describe", "--transactional-id", txn_id)
    assert described["state"] == "Ongoing" and described["topic_partitions"] == [f"{topic}-0", f"{topic}-1"]
    assert described["producer_id"] == listed[txn_id]["producer_id"]
    [active] = cli(txn_broker, "describe-producers", "--topic", topic, "--partition", "0")
    assert active["producer_id"] == described["producer_id"] and active["current_transaction_start_offset"] == 0
    # the coordinator knows this transaction: it is not hanging, however old
    assert cli(txn_broker, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == []
    producer.abort_transaction()
    [described] = cli(txn_broker, "describe", "--transactional-id", txn_id)
    assert described["state"] in ("PrepareAbort", "CompleteAbort")

    table = pybroker("transactions", "list", "--bootstrap-server", txn_broker.bootstrap)
    assert table.returncode == 0 and "TRANSACTIONAL-ID" in table.stdout and txn_id in table.stdout
    missing = transactions("describe", "--transactional-id", f"never-{topic}", "--bootstrap-server",
                           txn_broker.bootstrap)
    assert missing.exit_code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    bad = transactions("list", "--transactional-id-pattern", "(a", "--bootstrap-server", txn_broker.bootstrap)
    assert bad.exit_code == 1 and "INVALID_REGULAR_EXPRESSION" in bad.stderr


def _hang_a_transaction(bootstrap: str, topic: str) -> int:
    """Write a transactional batch into a partition its transaction never added (possible only without
    KIP-890 verification, as it was before Kafka 3.6): the coordinator will never write its marker. Returns
    the batch's offset."""
    with WireClient(bootstrap) as client:
        init = client.call(InitProducerIdRequest(transactional_id=f"hang-{topic}", transaction_timeout_ms=60_000),
                           max_version=4)
        for _ in range(100):
            if init.error_code == 0:
                break
            time.sleep(0.1)
            init = client.call(InitProducerIdRequest(transactional_id=f"hang-{topic}", transaction_timeout_ms=60_000),
                               max_version=4)
        assert init.error_code == 0, init
        batch = build_batch([Record(0, 0, b"k", b"hanging")], base_timestamp=int(time.time() * 1000),
                            producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0,
                            is_transactional=True)
        produced = client.call(ProduceRequest(transactional_id=f"hang-{topic}", acks=-1, timeout_ms=10_000,
                                              topic_data=[TopicProduceData(name=topic, partition_data=[
                                                  PartitionProduceData(index=0, records=batch)])]), max_version=9)
        answer = produced.responses[0].partition_responses[0]
        assert answer.error_code == 0, answer
        return int(answer.base_offset)


@pytest.mark.slow
def test_cli_finds_and_aborts_a_hanging_transaction(broker_factory: Callable[..., BrokerProcess],
                                                    new_topic: Callable[..., str]) -> None:
    broker = broker_factory({**TXN_OVERRIDES, "transaction.partition.verification.enable": "false"})
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    before = ck_producer(broker.bootstrap)
    before.produce(topic, value=b"before", partition=0)
    assert before.flush(20) == 0
    offset = _hang_a_transaction(broker.bootstrap, topic)
    after = ck_producer(broker.bootstrap)
    after.produce(topic, value=b"after", partition=0)
    assert after.flush(20) == 0
    # the hanging transaction holds the last stable offset: read_committed readers stop before it
    assert read_values("confluent-kafka", broker.bootstrap, topic, 1, READ_COMMITTED) == [b"before"]

    [hanging] = cli(broker, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
    assert hanging["partition"] == 0 and hanging["start_offset"] == offset
    assert cli(broker, "find-hanging", "--max-transaction-timeout", "0") == [hanging]  # every topic searched
    assert cli(broker, "find-hanging", "--topic", topic) == []  # younger than 15 minutes: not yet a suspect
    [aborted] = cli(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(offset))
    assert aborted["aborted"] is True and aborted["producer_id"] == hanging["producer_id"]
    assert cli(broker, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == []
    assert read_values("confluent-kafka", broker.bootstrap, topic, 1, READ_COMMITTED, expected=2) == [b"before",
                                                                                                      b"after"]
    again = transactions("abort", "--topic", topic, "--partition", "0", "--start-offset", str(offset),
                         "--bootstrap-server", broker.bootstrap)
    assert again.exit_code == 1 and "no open transaction starts at offset" in again.stderr
