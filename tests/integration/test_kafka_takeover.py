"""pybroker started on a stopped Apache Kafka 4 node's log dir serves what Kafka served (issue 30, Kafka to
pybroker): the same topics with the same ids and configs, the same records at the same offsets with the
same timestamps and headers, aborted transactions hidden from read_committed, the committed group offsets.
Kafka's answers before it stopped are the oracle; pybroker's after the takeover must equal them.

One Kafka node and one pybroker share the module (a JVM start is 8-12 s on two cores).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_consumer, ck_flush, ck_producer, close_clients
from tests.integration.takeover_workload import (
    ACLS,
    BROKER_CONFIGS,
    CLUSTER_DEFAULT,
    COMMITTED,
    CONF,
    OPEN,
    PARTITIONS,
    PASSWORD,
    SECURITY,
    TOPIC_CONFIGS,
    TXN,
    USER,
    Seen,
    fill,
    observe,
    open_transaction,
    read_all,
)
from tests.kafka_node import KafkaNode, missing_reason, required

pytestmark = [pytest.mark.slow, pytest.mark.hang_limit(240)]

def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


@dataclass
class Takeover:
    kafka: Seen
    pybroker: Seen
    data: Path
    metadata_before: dict[str, str]
    broker: BrokerProcess


@pytest.fixture(scope="module")
def takeover(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Takeover]:
    reason = missing_reason()
    if reason is not None:
        if required():
            pytest.fail(reason)
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("kafka-takeover")
    node = KafkaNode(workdir / "kafka", dict(SECURITY))
    node.start()
    try:
        bootstrap = f"127.0.0.1:{node.port}"
        fill(bootstrap)
        oracle = observe(bootstrap, "127.0.0.1", node.port)
        open_transaction(bootstrap)
    finally:
        close_clients()
        node.stop()
    data = workdir / "kafka" / "data"
    stray = data / "tk-unknown-0"  # a partition dir the metadata does not name
    stray.mkdir()
    (stray / "00000000000000000000.log").write_bytes(b"")
    before = _digest(data / "__cluster_metadata-0")
    broker = BrokerProcess(workdir / "pybroker", {**SECURITY, "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"},
                           log_dirs=[data], extra_listeners=["SASL_PLAINTEXT"]).start()
    try:
        seen = observe(broker.bootstrap, broker.host, broker.port)
        yield Takeover(oracle, seen, data, before, broker)
    finally:
        close_clients()
        broker.close()


def test_same_topics_and_ids(takeover: Takeover) -> None:
    assert set(takeover.kafka.topic_ids) == set(PARTITIONS)
    ids = dict(takeover.pybroker.topic_ids)
    assert ids.pop(OPEN, None) is not None  # made after the oracle's look
    assert ids == takeover.kafka.topic_ids


def test_same_records_at_the_same_offsets(takeover: Takeover) -> None:
    for key, records in takeover.kafka.records.items():
        assert records, key
        assert takeover.pybroker.records[key] == records, key


def test_read_committed_hides_the_aborted_transaction(takeover: Takeover) -> None:
    committed = [r[4] for r in takeover.pybroker.records["read_committed", TXN]]
    everything = [r[4] for r in takeover.pybroker.records["read_uncommitted", TXN]]
    assert committed == [b"t1", b"t2", b"t3", b"t4"]
    assert b"aborted1" in everything and b"aborted2" in everything


def test_committed_group_offsets_and_topic_configs(takeover: Takeover) -> None:
    assert takeover.kafka.committed == COMMITTED
    assert takeover.pybroker.committed == COMMITTED
    assert takeover.kafka.configs == TOPIC_CONFIGS
    assert takeover.pybroker.configs == TOPIC_CONFIGS


def test_kafka_metadata_kept_and_gone_on_from_and_unknown_partition_set_aside(takeover: Takeover) -> None:
    """Every file Kafka wrote in its metadata log keeps its bytes; pybroker goes on from the log's end in a
    segment of its own (the live metadata log), and writes nothing there until it changes metadata."""
    after = _digest(takeover.data / "__cluster_metadata-0")
    assert {name: after[name] for name in takeover.metadata_before} == takeover.metadata_before
    added = set(after) - set(takeover.metadata_before)
    assert len(added) == 1 and next(iter(added)).endswith(".log")
    assert after[next(iter(added))] == hashlib.sha256(b"").hexdigest()
    assert not (takeover.data / "tk-unknown-0").exists()
    assert [p.name for p in takeover.data.iterdir() if p.name.startswith("tk-unknown-0.")
            and p.name.endswith("-stray")]
    assert "took over Apache Kafka's metadata log" in takeover.broker.log_path.read_text()


def test_new_producer_ids_do_not_repeat_kafkas(takeover: Takeover) -> None:
    """Kafka handed out producer ids from its first block; pybroker's first id comes after that block."""
    producer = ck_producer(takeover.broker.bootstrap, **{"enable.idempotence": True})
    producer.produce(CONF, value=b"after", partition=0)
    ck_flush(producer)
    # Kafka's controller handed its broker the block [0, 1000): the block pybroker hands out from now
    # starts at 1000, so the file holds its end, 2000 or more
    assert int((takeover.data / "producer-id-block").read_text()) >= 2000


def test_same_client_quotas(takeover: Takeover) -> None:
    assert "producer_byte_rate=1024.0" in " ".join(takeover.kafka.quotas)
    assert takeover.pybroker.quotas == takeover.kafka.quotas


def test_same_group_configs_and_client_metrics_subscription(takeover: Takeover) -> None:
    assert [line.split()[0] for line in takeover.kafka.group_configs] == [
        "share.record.lock.duration.ms=45000", "streams.num.standby.replicas=1"]
    assert takeover.pybroker.group_configs == takeover.kafka.group_configs
    assert "interval.ms=60000" in [line.split()[0] for line in takeover.kafka.client_metrics]
    assert takeover.pybroker.client_metrics == takeover.kafka.client_metrics


def test_same_acls_and_scram_users(takeover: Takeover) -> None:
    assert len(takeover.kafka.acls) == len(ACLS)
    assert takeover.pybroker.acls == takeover.kafka.acls
    assert takeover.kafka.scram == {USER: [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)]}
    assert takeover.pybroker.scram == takeover.kafka.scram


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_user_logs_in_and_its_acls_hold(takeover: Takeover, mechanism: str) -> None:
    """The password set on Kafka works on pybroker, and Kafka's ACLs decide what the user may read: the
    allowed topic is served, the other one refused (librdkafka shows no error for an assigned partition it
    may not describe, so the refusal is read from the broker's authorization log)."""
    settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": USER,
                "sasl.password": PASSWORD}
    bootstrap = takeover.broker.bootstrap_of("SASL_PLAINTEXT")
    values: list[bytes] = []
    with ck_consumer(bootstrap, **settings) as consumer:
        consumer.assign([TopicPartition(CONF, 0, 0), TopicPartition(TXN, 0, 0)])
        deadline = time.monotonic() + 30
        while not values and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(num_messages=100, timeout=0.3) if m.error() is None
                       and m.topic() == CONF]
    assert values, "the ACL-allowed topic gave nothing"

    def refused() -> bool:
        return any('"authorization denied"' in line and f'"User:{USER}"' in line and f'"{TXN}"' in line
                   for line in takeover.broker.log_path.read_text(errors="replace").splitlines())

    deadline = time.monotonic() + 10
    while not refused() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert refused(), "reading a topic without an ACL was not refused"
    assert PASSWORD not in takeover.broker.log_path.read_text(errors="replace")


def test_a_transaction_open_at_the_stop_stays_open_until_its_producer_returns(takeover: Takeover) -> None:
    """Kafka's __transaction_state says the transaction is ongoing: pybroker keeps its records from
    read_committed consumers, and the producer's next init (same transactional.id) aborts it, as Kafka would."""
    bootstrap = takeover.broker.bootstrap
    assert [r[4] for r in read_all(bootstrap, OPEN, "read_uncommitted")] == [b"open1"]
    assert read_all(bootstrap, OPEN, "read_committed") == []  # held back by the open transaction
    producer = ck_producer(bootstrap, **{"transactional.id": OPEN})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(OPEN, value=b"after-open")
    producer.commit_transaction(30)
    assert [r[4] for r in read_all(bootstrap, OPEN, "read_committed")] == [b"after-open"]
    assert [r[4] for r in read_all(bootstrap, OPEN, "read_uncommitted")] == [b"open1", b"after-open"]


def test_dynamic_broker_configs(takeover: Takeover) -> None:
    """Kafka's per-node and cluster-wide dynamic broker configs hold on pybroker, from the same layer."""
    assert takeover.kafka.broker_configs == {
        **{key: (value, "DYNAMIC_BROKER_CONFIG") for key, value in BROKER_CONFIGS.items()},
        **{key: (value, "DYNAMIC_DEFAULT_BROKER_CONFIG") for key, value in CLUSTER_DEFAULT.items()}}
    assert takeover.pybroker.broker_configs == takeover.kafka.broker_configs
